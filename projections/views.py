"""Read-side views of a job as JSON-ready dicts."""

from typing import Any

from projections.lifecycle.state import Job


def job_view(job: Job) -> dict[str, Any]:
    accepted = job.accepted
    return {
        "job_id": str(job.job_id),
        "state": job.status.value,
        "caller_identity": accepted.caller_identity,
        "idempotency_key": accepted.idempotency_key,
        "job_type": accepted.job_type,
        "url": accepted.request.url,
        "accepted_at": accepted.occurred_at.isoformat(),
        "deadline_at": accepted.deadline_at.isoformat(),
        "attempt_limit": accepted.attempt_limit,
        "attempts": [attempt.model_dump(mode="json") for attempt in job.attempts],
        "lease": None
        if job.lease is None
        else {
            "attempt_number": job.lease.attempt_number,
            "lease_id": str(job.lease.lease_id),
            "lease_expires_at": job.lease.lease_expires_at.isoformat(),
        },
        "next_attempt_at": None if job.next_attempt_at is None else job.next_attempt_at.isoformat(),
        "artifacts": [artifact.model_dump(mode="json") for artifact in job.artifacts],
        "failure": None if job.failure is None else job.failure.model_dump(mode="json"),
        "completed_at": None if job.completed_at is None else job.completed_at.isoformat(),
        "reuse_count": job.reuse_count,
        "sequence": job.sequence,
    }
