"""A job's current state: everything `decide` needs, folded from its events by `evolve`."""

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from schemas.enums import AttemptOutcome, JobStatus
from schemas.events import JobAccepted
from schemas.records import Artifact, Attempt, Failure

TERMINAL_STATUSES = frozenset({JobStatus.SUCCEEDED, JobStatus.DEAD_LETTER, JobStatus.CANCELLED})
RECENT_COMMANDS_KEPT = 64


@dataclass(frozen=True)
class Lease:
    attempt_number: int
    lease_id: UUID
    lease_expires_at: datetime


@dataclass(frozen=True)
class Job:
    accepted: JobAccepted
    status: JobStatus
    sequence: int
    dispatch_count: int = 0
    lease: Lease | None = None
    next_attempt_at: datetime | None = None
    attempts: tuple[Attempt, ...] = ()
    lease_expiries: int = 0
    artifacts: tuple[Artifact, ...] = ()
    failure: Failure | None = None
    completed_at: datetime | None = None
    reuse_count: int = 0
    callback_recorded: bool = False
    recent_command_ids: tuple[UUID, ...] = ()

    @property
    def job_id(self) -> UUID:
        return self.accepted.job_id

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def budget_spent(self) -> int:
        """Attempts that count against the budget: physical attempts and expired leases."""
        return self.lease_expiries + sum(1 for attempt in self.attempts if not is_denial(attempt))


def is_denial(attempt: Attempt) -> bool:
    """A local capacity or policy denial made no call, so it costs no budget."""
    return attempt.outcome is AttemptOutcome.DENIED
