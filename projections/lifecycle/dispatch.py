"""Granting a lease: the next attempt number, its fencing token and its expiry.

The first lease is granted with the acceptance and recorded in its `JobAccepted`
(`first_lease_expires_at`); `dispatch_of` gives the `JobDispatched` it stands for.
"""

from datetime import datetime, timedelta

from projections.lifecycle.emit import Emitter, held_event
from projections.lifecycle.identity import lease_id_for
from projections.lifecycle.policy import Policy
from projections.lifecycle.state import Job, Lease
from schemas.events import Event, JobAccepted, JobDispatched


def lease_until(max_runtime_ms: int, now: datetime, policy: Policy) -> datetime:
    """The lease covers the start window and a whole run; starting the work shortens it."""
    return now + timedelta(milliseconds=policy.start_window_ms + policy.lease_ms(max_runtime_ms))


def dispatch(state: Job, emit: Emitter, policy: Policy) -> None:
    attempt_number = state.dispatch_count + 1
    emit(
        JobDispatched,
        attempt_number=attempt_number,
        lease_id=lease_id_for(state.job_id, attempt_number),
        lease_expires_at=lease_until(state.accepted.max_runtime_ms, emit.now, policy),
    )


def first_lease_of(accepted: JobAccepted) -> Lease | None:
    """The lease an acceptance hands its job out under: attempt 1's, unless logged before it held one."""
    if accepted.first_lease_expires_at is None:
        return None
    return Lease(1, lease_id_for(accepted.job_id, 1), accepted.first_lease_expires_at)


def dispatch_of(event: Event) -> JobDispatched | None:
    """The dispatch an event is or holds: itself, an acceptance's first one, or none."""
    if isinstance(event, JobDispatched):
        return event
    lease = first_lease_of(event) if isinstance(event, JobAccepted) else None
    if lease is None:
        return None
    return held_event(
        event,
        JobDispatched,
        "dispatch",
        attempt_number=lease.attempt_number,
        lease_id=lease.lease_id,
        lease_expires_at=lease.lease_expires_at,
    )
