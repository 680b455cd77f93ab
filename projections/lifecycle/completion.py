"""The public terminal record of a job or of a rejected submission, and its callback delivery."""

from projections.lifecycle.state import Job
from schemas.enums import ArtifactTrust, FailureDisposition, JobStatus
from schemas.events import Event, JobCompleted, JobRejected
from schemas.records import Failure
from schemas.work import CallbackDue


def completion_of(state: Job) -> JobCompleted | None:
    """The one `JobCompleted` for a terminal job; None while it is still running."""
    if not state.is_terminal or state.completed_at is None:
        return None
    accepted = state.accepted
    # The attempt that ended the job: a stored page, or a remembered negative answer, may be the cache's.
    ended = state.status in (JobStatus.SUCCEEDED, JobStatus.DEAD_LETTER)
    answered = state.attempts[-1] if ended and state.attempts else None
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
        artifacts_trust=_trust_of(state),
        from_cache=answered is not None and answered.from_cache,
        cached_at=None if answered is None else answered.cached_at,
    )


def _trust_of(state: Job) -> ArtifactTrust:
    """The trust of the attempt a job succeeded with (its last); nothing else has artifacts."""
    if state.status is JobStatus.SUCCEEDED and state.attempts:
        return state.attempts[-1].trust
    return ArtifactTrust.VERIFIED


def rejection_completion(rejected: JobRejected) -> JobCompleted:
    """A rejected submission ends in a `REJECTED` completion whose failure names the reason."""
    return JobCompleted(
        job_id=rejected.job_id,
        caller_identity=rejected.caller_identity,
        idempotency_key=rejected.idempotency_key,
        job_type=rejected.job_type,
        url=rejected.url,
        status=JobStatus.REJECTED,
        attempt_count=0,
        failure=Failure(
            code=rejected.reason.value, disposition=FailureDisposition.TERMINAL, safe_message=rejected.detail
        ),
        completed_at=rejected.occurred_at,
        labels=rejected.labels,
    )


def callback_for(terminal: Event, callback_url: str, completion: JobCompleted) -> CallbackDue:
    """The delivery of `completion`; its webhook id stays the same on every try."""
    return CallbackDue(
        job_id=completion.job_id,
        callback_url=callback_url,
        webhook_id=webhook_id_of(terminal),
        completion=completion,
    )


def webhook_id_of(terminal: Event) -> str:
    """The `webhook-id` of the callback a terminal event starts (receivers dedupe by it)."""
    return f"msg_{terminal.event_id.hex}"
