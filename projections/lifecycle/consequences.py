"""What the shell must publish after a job's new events, and when its next timer is due."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import msgspec

from projections.artifacts import reference_key
from projections.lifecycle.attempts import recorded_attempt
from projections.lifecycle.cache import cache_entry
from projections.lifecycle.callbacks import first_try, next_callback_timer
from projections.lifecycle.completion import completion_of, rejection_completion, webhook_id_of
from projections.lifecycle.dispatch import dispatch_of
from projections.lifecycle.monitor_work import check_rejected, check_result, monitor_consequences
from projections.lifecycle.monitors import monitor_timer
from projections.lifecycle.policy import Policy, renew_interval_ms
from projections.lifecycle.state import Job, Lease, Monitor, PendingCallback, State
from schemas.commands import RecordCheck, SubmitJob
from schemas.enums import JobStatus, ReportKind
from schemas.events import (
    AttemptRecorded,
    CallbackDispatched,
    CallbackReplayed,
    Event,
    JobAccepted,
    JobCancelled,
    JobCompleted,
    JobDeadLettered,
    JobDispatched,
    JobHistoryDeleted,
    JobRejected,
    JobSucceeded,
    StaleReportIgnored,
)
from schemas.records import Attempt
from schemas.work import (
    ArtifactReference,
    CacheEntry,
    CallbackDue,
    DueWork,
    LeaseRevoked,
    MonitorChange,
    ReadCheck,
)

TERMINAL_EVENTS = (JobSucceeded, JobDeadLettered, JobCancelled)
RUNNING_REPORTS = (ReportKind.START, ReportKind.RENEWAL)


@dataclass(frozen=True)
class Consequences:
    due: list[DueWork] = field(default_factory=list)
    completions: list[JobCompleted] = field(default_factory=list)
    callbacks: list[CallbackDue] = field(default_factory=list)
    cache_entries: list[CacheEntry] = field(default_factory=list)
    references: list[ArtifactReference] = field(default_factory=list)
    released: list[bytes] = field(default_factory=list)  # reference keys to tombstone
    revoked: list[LeaseRevoked] = field(default_factory=list)  # to the due topic, for the executor
    commands: list[SubmitJob | RecordCheck] = field(default_factory=list)  # a monitor's check, its result
    reads: list[ReadCheck] = field(default_factory=list)  # checks whose content is to be read
    changes: list[MonitorChange] = field(default_factory=list)


def consequences_of(
    state: State, events: Sequence[Event], policy: Policy, before: State = None
) -> Consequences:
    """Dispatches become due work, attempts cache entries and artifact references, ends completions
    and callbacks; a deleted history (`before` is the job as it was) releases its references; a
    stale start or renewal, or a cancellation, revokes the lease its executor still runs under."""
    result = Consequences()
    if state is None:
        return result
    if isinstance(state, Monitor):
        monitor_consequences(
            state, events, result.commands, result.reads, result.changes, result.callbacks, result.references
        )
    for event in events:
        if isinstance(event, JobHistoryDeleted) and isinstance(before, Job):
            result.released.extend(_released(before))
        elif isinstance(event, StaleReportIgnored) and isinstance(state, Job):
            result.revoked.extend(_revoked(event))
        elif isinstance(event, JobCancelled) and isinstance(before, Job) and before.lease is not None:
            result.revoked.append(_cancelled(before, before.lease))
        if isinstance(state, Job) and isinstance(
            event, (JobDispatched, JobAccepted, AttemptRecorded, *TERMINAL_EVENTS)
        ):
            _of_job(state, event, result, policy)
        elif isinstance(event, JobRejected) and not isinstance(state, Job):
            # A rejection on an accepted job (a reused idempotency key) ends no job: its submitter
            # reads it from the events; the job's own completion is its one.
            result.completions.append(rejection_completion(event))
            result.commands.extend(check_rejected(event))
            result.callbacks.extend(first_try(state.callbacks, webhook_id_of(event)))
        elif isinstance(event, CallbackReplayed | CallbackDispatched):
            result.callbacks.extend(_try_of(state.callbacks, event))
    return result


def _try_of(
    callbacks: tuple[PendingCallback, ...], event: CallbackReplayed | CallbackDispatched
) -> list[CallbackDue]:
    """The delivery a replay starts, or the next try of one."""
    if isinstance(event, CallbackReplayed):
        return first_try(callbacks, event.webhook_id)
    pending = next((p for p in callbacks if p.webhook_id == event.webhook_id), None)
    if pending is None:
        return []
    return [msgspec.structs.replace(pending.due, attempt_number=event.attempt_number)]


def _of_job(state: Job, event: Event, result: Consequences, policy: Policy) -> None:
    attempt = recorded_attempt(event)
    if attempt is not None:
        _of_attempt(state, attempt, result, policy)
    if isinstance(event, JobDispatched | JobAccepted):
        dispatched = dispatch_of(event)
        if dispatched is not None:
            result.due.append(due_work(state, dispatched, policy))
    elif not isinstance(event, AttemptRecorded):
        completion = completion_of(state)
        if completion is not None:
            result.completions.append(completion)
            result.commands.extend(check_result(state, completion))
        result.callbacks.extend(first_try(state.callbacks, webhook_id_of(event)))


def _of_attempt(state: Job, attempt: Attempt, result: Consequences, policy: Policy) -> None:
    # An answer that blocked its route speaks of the exit, not of the page: it is not remembered.
    entry = None if policy.routes.blocks(attempt) else cache_entry(state, attempt)
    if entry is not None:
        result.cache_entries.append(entry)
    result.references.extend(
        ArtifactReference(artifact_key=artifact.key, job_id=state.job_id, expires_at=artifact.expires_at)
        for artifact in attempt.artifacts
    )


def _revoked(stale: StaleReportIgnored) -> list[LeaseRevoked]:
    """A stale start or renewal comes from an executor still running the work: it is told to stop."""
    if stale.kind not in RUNNING_REPORTS:
        return []
    return [
        LeaseRevoked(
            job_id=stale.job_id,
            attempt_number=stale.attempt_number,
            lease_id=stale.lease_id,
            reason=stale.reason,
        )
    ]


def _cancelled(job: Job, lease: Lease) -> LeaseRevoked:
    """A cancelled job's running work stops now, not at its next renewal."""
    return LeaseRevoked(
        job_id=job.job_id,
        attempt_number=lease.attempt_number,
        lease_id=lease.lease_id,
        reason="the job was cancelled",
    )


def _released(job: Job) -> list[bytes]:
    keys = {artifact.key for attempt in job.attempts for artifact in attempt.artifacts}
    return [reference_key(key, job.job_id) for key in sorted(keys)]


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
        cache_mode=state.effective_cache_mode,
        capture_mode=accepted.capture_mode,
        retention_class=accepted.retention_class,
        transport_policy=accepted.transport_policy,
        deadline_at=accepted.deadline_at,
        start_by=dispatched.occurred_at + timedelta(milliseconds=policy.start_window_ms),
        request_hash=accepted.request_hash,
        render=accepted.render,
        avoid_routes=policy.routes.avoided(state.attempts),
        credential=accepted.credential,
        upload_url=None,  # the worker hands one out for a remotely run type
        upload_key=None,
        caller_identity=accepted.caller_identity,
    )


def next_due_at(state: State, policy: Policy) -> datetime | None:
    """When a timer must next look at the job: its lease, retry or a callback try, whichever is first."""
    if state is None:
        return None
    callback_at = next_callback_timer(state.callbacks, policy)
    if isinstance(state, Monitor):
        job_at = monitor_timer(state)
    else:
        job_at = _job_timer(state) if isinstance(state, Job) else None
    return min((at for at in (job_at, callback_at) if at is not None), default=None)


def _job_timer(state: Job) -> datetime | None:
    if state.is_terminal:
        return None
    if state.status is JobStatus.LEASED and state.lease is not None:
        return state.lease.lease_expires_at
    if state.status is JobStatus.RETRY_WAIT and state.next_attempt_at is not None:
        return state.next_attempt_at
    return state.accepted.occurred_at


def lease_expiry(state: State) -> datetime | None:
    """The lease the horizon sweep may need to judge: only a running job's lease."""
    if isinstance(state, Job) and state.status is JobStatus.LEASED and state.lease is not None:
        return state.lease.lease_expires_at
    return None
