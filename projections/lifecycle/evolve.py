"""`evolve(state, event) -> state`: folds one event into a job, one short case per event type."""

from __future__ import annotations

import copy
import typing
from collections.abc import Iterable
from typing import TypeVar, assert_never

import msgspec

from projections.lifecycle.callbacks import finish_callback, start_callback, update_callback
from projections.lifecycle.completion import callback_for, completion_of, rejection_completion, webhook_id_of
from projections.lifecycle.dispatch import first_lease_of
from projections.lifecycle.monitors import evolve_monitor, replayed
from projections.lifecycle.state import Job, Lease, Monitor, State, Unaccepted, remembered, updated
from schemas.enums import ExpiryReason, JobStatus
from schemas.events import (
    AttemptRecorded,
    AttemptStarted,
    AuditRecorded,
    AuditRecordsPurged,
    CallbackAbandoned,
    CallbackDelivered,
    CallbackDispatched,
    CallbackReplayed,
    CallbackRetryScheduled,
    ChangeDetected,
    CheckFetched,
    CheckRecorded,
    CheckScheduled,
    Event,
    JobAccepted,
    JobCancelled,
    JobDeadLettered,
    JobDispatched,
    JobHistoryDeleted,
    JobRedriven,
    JobRejected,
    JobSucceeded,
    LeaseExpired,
    LeaseRenewed,
    MonitorCreated,
    MonitorDeleted,
    MonitorEdited,
    MonitorEvent,
    MonitorPaused,
    MonitorRefused,
    MonitorResumed,
    RetryScheduled,
    StaleReportIgnored,
    SubmissionReused,
)
from schemas.records import Artifact, Failure
from schemas.work import CallbackDue

MONITOR_EVENTS = typing.get_args(MonitorEvent)
CALLBACK_EVENTS = (CallbackDispatched, CallbackRetryScheduled, CallbackDelivered, CallbackAbandoned)

# A monitor's checks: each command is decided once by the check it names, so a monitor's dedupe window
# does not grow with its checks.
CHECK_FLOW = (CheckScheduled, CheckFetched, CheckRecorded, ChangeDetected)


def start(accepted: JobAccepted, before: Unaccepted | None = None) -> Job:
    """The state a job has before its first event is folded (keeping an earlier unaccepted stream)."""
    job = Job(accepted=accepted, status=JobStatus.PENDING, sequence=0)
    if before is None:
        return job
    return updated(
        job,
        callbacks=before.callbacks,
        callbacks_finished=before.callbacks_finished,
        recent_command_ids=before.recent_command_ids,
        recent_command_at=before.recent_command_at,
    )


def evolve(state: State, event: Event) -> State:
    """Fold one event; a job id gets an `Unaccepted` state until a `JobAccepted` arrives, a monitor
    id a `Monitor` with its `MonitorCreated`."""
    if isinstance(event, MONITOR_EVENTS):
        # A monitor's event on a job's stream (never written so) keeps nothing.
        folded: Job | Unaccepted | Monitor = (
            evolve_monitor(state, event)
            or state
            or _unaccepted(Unaccepted(job_id=event.job_id, sequence=0), event)
        )
    elif isinstance(state, Monitor) and isinstance(event, CallbackReplayed):
        folded = replayed(state, event)
    elif isinstance(state, Monitor):
        folded = _callback(state, event) if isinstance(event, CALLBACK_EVENTS) else state
    elif isinstance(state, Job) and not isinstance(event, JobHistoryDeleted):
        folded = _apply(state, event)
    elif isinstance(event, JobAccepted) and not isinstance(state, Job):
        folded = start(event, state)
        first = first_lease_of(event)
        if first is not None:  # handed out at once
            folded = _leased(folded, first)
    elif isinstance(state, Job):
        folded = _forgotten(state)
    else:
        folded = _unaccepted(state or Unaccepted(job_id=event.job_id, sequence=0), event)
    if isinstance(event, CHECK_FLOW):  # fenced by the check they are for: nothing to remember
        ids, times = folded.recent_command_ids, folded.recent_command_at
    else:
        ids, times = remembered(
            folded.recent_command_ids, folded.recent_command_at, event.command_id, event.occurred_at
        )
    # `folded` is a fresh copy unless the event changed nothing but the bookkeeping.
    if folded is state:
        folded = copy.copy(folded)
    folded.__dict__.update(sequence=event.sequence, recent_command_ids=ids, recent_command_at=times)
    return folded


def replay(events: Iterable[Event], state: State = None) -> State:
    for event in events:
        state = evolve(state, event)
    return state


def _forgotten(job: Job) -> Unaccepted:
    """A job whose history was deleted keeps only what dedupes its commands and orders its events."""
    return Unaccepted(
        job_id=job.job_id,
        sequence=job.sequence,
        callbacks_finished=job.callbacks_finished,
        recent_command_ids=job.recent_command_ids,
        recent_command_at=job.recent_command_at,
    )


def _unaccepted(state: Unaccepted, event: Event) -> Unaccepted:
    match event:
        case JobRejected():
            if event.callback_url is None:
                return updated(state, rejections=state.rejections + 1, rejected=event)
            due = callback_for(event, event.callback_url, rejection_completion(event))
            callbacks = (*state.callbacks, start_callback(due, event.occurred_at))
            return updated(state, rejections=state.rejections + 1, callbacks=callbacks, rejected=event)
        case CallbackDispatched() | CallbackRetryScheduled() | CallbackDelivered() | CallbackAbandoned():
            return _callback(state, event)
        case AuditRecorded():
            return updated(state, audit_records=state.audit_records + 1)
        case _:
            return state


def _leased(state: Job, lease: Lease) -> Job:
    return updated(
        state, status=JobStatus.LEASED, lease=lease, dispatch_count=lease.attempt_number, next_attempt_at=None
    )


def _apply(state: Job, event: Event) -> Job:  # noqa: C901 - one flat case per event type
    match event:
        case StaleReportIgnored():
            traced = (event.kind, event.attempt_number, event.lease_id)
            return updated(state, stale_traces=(*state.stale_traces, traced))
        case JobAccepted() | JobRejected() | AuditRecorded() | JobHistoryDeleted() | AuditRecordsPurged():
            return state
        case JobRedriven():
            accepted = msgspec.structs.replace(state.accepted, deadline_at=event.deadline_at)
            return updated(
                state,
                accepted=accepted,
                status=JobStatus.PENDING,
                lease=None,
                next_attempt_at=None,
                completed_at=None,
                artifacts=(),
                budget_base=event.budget_spent_before,
                denial_base=state.denials + state.denial_base,
                cache_mode=event.cache_mode or state.cache_mode,
                redriven_at=event.occurred_at,
            )
        case SubmissionReused():
            return updated(state, reuse_count=state.reuse_count + 1)
        case JobDispatched():
            return _leased(state, Lease(event.attempt_number, event.lease_id, event.lease_expires_at))
        case AttemptStarted():
            lease = Lease(event.attempt_number, event.lease_id, event.lease_expires_at, event.occurred_at)
            return updated(state, lease=lease)
        case LeaseRenewed():
            started_at = state.lease.started_at if state.lease is not None else None
            lease = Lease(event.attempt_number, event.lease_id, event.lease_expires_at, started_at)
            return updated(state, lease=updated(lease, started_at=started_at or event.occurred_at))
        case AttemptRecorded():
            return updated(state, attempts=(*state.attempts, event.attempt))
        case RetryScheduled():
            return updated(
                state,
                status=JobStatus.RETRY_WAIT,
                lease=None,
                next_attempt_at=event.next_attempt_at,
                failure=event.failure,
            )
        case LeaseExpired():
            charged = 0 if event.reason is ExpiryReason.NOT_STARTED else 1
            return updated(
                state, lease=None, lease_expiries=state.lease_expiries + charged, failure=event.failure
            )
        case JobSucceeded():
            attempts = state.attempts if event.attempt is None else (*state.attempts, event.attempt)
            held = updated(state, attempts=attempts)
            return _terminal(held, JobStatus.SUCCEEDED, event, event.artifacts, None)
        case JobDeadLettered():
            return _terminal(state, JobStatus.DEAD_LETTER, event, (), event.failure)
        case JobCancelled():
            return _terminal(state, JobStatus.CANCELLED, event, (), state.failure)
        case CallbackDispatched() | CallbackRetryScheduled() | CallbackDelivered() | CallbackAbandoned():
            return _callback(state, event)
        case CallbackReplayed():
            return _replayed(state, event)
        case (
            MonitorCreated()
            | MonitorRefused()
            | MonitorEdited()
            | MonitorPaused()
            | MonitorResumed()
            | MonitorDeleted()
            | CheckScheduled()
            | CheckFetched()
            | CheckRecorded()
            | ChangeDetected()
        ):
            return state
        case _:
            assert_never(event)


S = TypeVar("S", Job, Unaccepted, Monitor)


def _replayed(state: Job, event: CallbackReplayed) -> Job:
    """The completion's callback, to be delivered again under its first webhook-id."""
    completion = completion_of(state)
    if completion is None:
        return state
    replay = state.callback_replays + 1
    url, webhook_id = event.callback_url, event.webhook_id
    due = CallbackDue(
        job_id=state.job_id, callback_url=url, webhook_id=webhook_id, completion=completion, replay=replay
    )
    callbacks = (*state.callbacks, start_callback(due, event.occurred_at))
    return updated(state, callbacks=callbacks, callback_replays=replay)


def _callback(
    state: S, event: CallbackDispatched | CallbackRetryScheduled | CallbackDelivered | CallbackAbandoned
) -> S:
    if isinstance(event, CallbackDispatched | CallbackRetryScheduled):
        return updated(state, callbacks=update_callback(state.callbacks, event))
    finished = finish_callback(state.callbacks, event.webhook_id)
    return updated(state, callbacks=finished, callbacks_finished=state.callbacks_finished + 1)


def _terminal(
    state: Job,
    status: JobStatus,
    event: Event,
    artifacts: tuple[Artifact, ...],
    failure: Failure | None,
) -> Job:
    ended = updated(
        state,
        status=status,
        lease=None,
        next_attempt_at=None,
        completed_at=event.occurred_at,
        artifacts=artifacts,
        failure=failure,
    )
    ended = updated(ended, completion_webhook_id=webhook_id_of(event))
    url = state.accepted.callback_url
    completion = None if url is None else completion_of(ended)
    if url is None or completion is None:
        return ended
    pending = start_callback(callback_for(event, url, completion), event.occurred_at)
    return updated(ended, callbacks=(*ended.callbacks, pending))
