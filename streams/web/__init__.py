"""The worker's HTTP API: read models of every job on any worker, audited mutations, health and metrics."""
