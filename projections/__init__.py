"""The pure side: the job lifecycle (decide, evolve), other folds, storage ports, queries."""
