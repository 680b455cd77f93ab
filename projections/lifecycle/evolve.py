"""`evolve(state, event) -> state`: folds one event into a job, one short case per event type."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import assert_never

from projections.lifecycle.state import RECENT_COMMANDS_KEPT, Job, Lease
from schemas.enums import JobStatus
from schemas.events import (
    AttemptRecorded,
    AuditRecorded,
    CallbackAbandoned,
    CallbackDelivered,
    Event,
    JobAccepted,
    JobCancelled,
    JobDeadLettered,
    JobDispatched,
    JobRejected,
    JobSucceeded,
    LeaseExpired,
    LeaseRenewed,
    RetryScheduled,
    StaleReportIgnored,
    SubmissionReused,
)
from schemas.records import Artifact, Failure


def start(accepted: JobAccepted) -> Job:
    """The state a job has before its first event is folded."""
    return Job(accepted=accepted, status=JobStatus.PENDING, sequence=0)


def evolve(state: Job | None, event: Event) -> Job | None:
    """Fold one event; events of a job that was never accepted leave no state."""
    if state is None:
        if not isinstance(event, JobAccepted):
            return None
        state = start(event)
    recent = state.recent_command_ids
    if event.command_id not in recent:
        recent = (*recent, event.command_id)[-RECENT_COMMANDS_KEPT:]
    return replace(_apply(state, event), sequence=event.sequence, recent_command_ids=recent)


def replay(events: Iterable[Event], state: Job | None = None) -> Job | None:
    for event in events:
        state = evolve(state, event)
    return state


def _apply(state: Job, event: Event) -> Job:  # noqa: C901 - one flat case per event type
    match event:
        case JobAccepted() | JobRejected() | StaleReportIgnored() | AuditRecorded():
            return state
        case SubmissionReused():
            return replace(state, reuse_count=state.reuse_count + 1)
        case JobDispatched():
            lease = Lease(event.attempt_number, event.lease_id, event.lease_expires_at)
            return replace(
                state,
                status=JobStatus.LEASED,
                lease=lease,
                dispatch_count=event.attempt_number,
                next_attempt_at=None,
            )
        case LeaseRenewed():
            return replace(state, lease=Lease(event.attempt_number, event.lease_id, event.lease_expires_at))
        case AttemptRecorded():
            return replace(state, attempts=(*state.attempts, event.attempt))
        case RetryScheduled():
            return replace(
                state,
                status=JobStatus.RETRY_WAIT,
                lease=None,
                next_attempt_at=event.next_attempt_at,
                failure=event.failure,
            )
        case LeaseExpired():
            return replace(state, lease=None, lease_expiries=state.lease_expiries + 1, failure=event.failure)
        case JobSucceeded():
            return _terminal(state, JobStatus.SUCCEEDED, event, event.artifacts, None)
        case JobDeadLettered():
            return _terminal(state, JobStatus.DEAD_LETTER, event, (), event.failure)
        case JobCancelled():
            return _terminal(state, JobStatus.CANCELLED, event, (), state.failure)
        case CallbackDelivered() | CallbackAbandoned():
            return replace(state, callback_recorded=True)
        case _:
            assert_never(event)


def _terminal(
    state: Job,
    status: JobStatus,
    event: Event,
    artifacts: tuple[Artifact, ...],
    failure: Failure | None,
) -> Job:
    return replace(
        state,
        status=status,
        lease=None,
        next_attempt_at=None,
        completed_at=event.occurred_at,
        artifacts=artifacts,
        failure=failure,
    )
