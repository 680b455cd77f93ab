"""What the shell must publish after a job's new events, and when its next timer is due."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from projections.lifecycle.completion import completion_of
from projections.lifecycle.policy import Policy, renew_interval_ms
from projections.lifecycle.state import Job
from schemas.enums import JobStatus
from schemas.events import Event, JobCancelled, JobCompleted, JobDeadLettered, JobDispatched, JobSucceeded
from schemas.work import CallbackDue, DueWork

TERMINAL_EVENTS = (JobSucceeded, JobDeadLettered, JobCancelled)


@dataclass(frozen=True)
class Consequences:
    due: list[DueWork] = field(default_factory=list)
    completions: list[JobCompleted] = field(default_factory=list)
    callbacks: list[CallbackDue] = field(default_factory=list)


def consequences_of(state: Job, events: Sequence[Event], policy: Policy) -> Consequences:
    """Dispatches become due work; the terminal event becomes the completion and its callback."""
    result = Consequences()
    for event in events:
        if isinstance(event, JobDispatched):
            result.due.append(due_work(state, event, policy))
        elif isinstance(event, TERMINAL_EVENTS):
            completion = completion_of(state)
            if completion is None:
                continue
            result.completions.append(completion)
            if state.accepted.callback_url is not None:
                result.callbacks.append(
                    CallbackDue(
                        job_id=state.job_id,
                        callback_url=state.accepted.callback_url,
                        webhook_id=f"msg_{event.event_id.hex}",
                        completion=completion,
                    )
                )
    return result


def due_work(state: Job, dispatched: JobDispatched, policy: Policy) -> DueWork:
    accepted = state.accepted
    return DueWork(
        job_id=state.job_id,
        attempt_number=dispatched.attempt_number,
        lease_id=dispatched.lease_id,
        lease_expires_at=dispatched.lease_expires_at,
        renew_interval_ms=renew_interval_ms(policy.lease_ms(accepted.max_runtime_ms)),
        max_runtime_ms=accepted.max_runtime_ms,
        job_type=accepted.job_type,
        request=accepted.request,
        policy_class=accepted.policy_class,
        cache_mode=accepted.cache_mode,
        capture_mode=accepted.capture_mode,
        retention_class=accepted.retention_class,
        transport_policy=accepted.transport_policy,
        deadline_at=accepted.deadline_at,
    )


def next_due_at(state: Job) -> datetime | None:
    """When a timer must next look at the job: lease expiry, retry time, or now if undispatched."""
    if state.is_terminal:
        return None
    if state.status is JobStatus.LEASED and state.lease is not None:
        return state.lease.lease_expires_at
    if state.status is JobStatus.RETRY_WAIT and state.next_attempt_at is not None:
        return state.next_attempt_at
    return state.accepted.occurred_at
