"""The job lifecycle as two pure functions: `decide` (the rules) and `evolve` (the fold)."""

from projections.lifecycle.decide import decide
from projections.lifecycle.evolve import evolve, replay
from projections.lifecycle.policy import ExecutionProfile, Policy
from projections.lifecycle.state import Job, Lease, State, Unaccepted

__all__ = ["ExecutionProfile", "Job", "Lease", "Policy", "State", "Unaccepted", "decide", "evolve", "replay"]
