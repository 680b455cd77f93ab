"""Topics followed into a fold every worker keeps: the global table, the route ledger, snapshots,
and a replay of the events into a lifecycle store."""
