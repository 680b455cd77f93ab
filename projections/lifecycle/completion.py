"""The public terminal record of a job, built from its state."""

from projections.lifecycle.state import Job
from schemas.events import JobCompleted


def completion_of(state: Job) -> JobCompleted | None:
    """The one `JobCompleted` for a terminal job; None while it is still running."""
    if not state.is_terminal or state.completed_at is None:
        return None
    accepted = state.accepted
    return JobCompleted(
        job_id=accepted.job_id,
        caller_identity=accepted.caller_identity,
        idempotency_key=accepted.idempotency_key,
        job_type=accepted.job_type,
        url=accepted.request.url,
        status=state.status,
        attempt_count=len(state.attempts),
        artifacts=state.artifacts,
        failure=state.failure,
        completed_at=state.completed_at,
        labels=accepted.labels,
    )
