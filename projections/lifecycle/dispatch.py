"""Granting a lease: the next attempt number, its fencing token and its expiry."""

from datetime import timedelta

from projections.lifecycle.emit import Emitter
from projections.lifecycle.identity import lease_id_for
from projections.lifecycle.policy import Policy
from projections.lifecycle.state import Job
from schemas.events import JobDispatched


def dispatch(state: Job, emit: Emitter, policy: Policy) -> None:
    """The lease covers the start window and a whole run; starting the work shortens it."""
    attempt_number = state.dispatch_count + 1
    lease = timedelta(milliseconds=policy.start_window_ms + policy.lease_ms(state.accepted.max_runtime_ms))
    emit(
        JobDispatched,
        attempt_number=attempt_number,
        lease_id=lease_id_for(state.job_id, attempt_number),
        lease_expires_at=emit.now + lease,
    )
