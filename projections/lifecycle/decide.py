"""`decide(state, command, now, policy) -> events`: every job lifecycle rule, and only here.

Pure: no I/O, no clock. A command already applied (its id is among the job's recent
command ids) decides nothing, so a redelivered command can never add events.
"""

from __future__ import annotations

import typing
from datetime import datetime, timedelta
from typing import assert_never
from uuid import UUID

import msgspec

from projections.lifecycle.audit import purge_audit
from projections.lifecycle.callbacks import check_callbacks, report_callback
from projections.lifecycle.dispatch import dispatch
from projections.lifecycle.emit import Emitter, command_id_of
from projections.lifecycle.monitors import decide_create, decide_monitor
from projections.lifecycle.mutations import mutate, record_audit, replay_change
from projections.lifecycle.policy import Policy, ceil_to_millis
from projections.lifecycle.state import Job, Lease, Monitor, State, accepted_job, is_denial
from projections.lifecycle.submission import decide_submit
from schemas.commands import (
    CancelJob,
    CheckTimers,
    Command,
    CreateMonitor,
    DeleteJobHistory,
    DeleteMonitor,
    EditMonitor,
    MonitorCommand,
    PauseMonitor,
    PurgeAuditRecords,
    RecordAudit,
    RecordCheck,
    RedriveJob,
    RenewLease,
    ReplayCallback,
    ReportAttempt,
    ReportCallback,
    ReportCheckReading,
    ResumeMonitor,
    StartAttempt,
    SubmitJob,
)
from schemas.enums import (
    AttemptOutcome,
    ExpiryReason,
    FailureDisposition,
    JobStatus,
    ReportKind,
)
from schemas.events import (
    AttemptRecorded,
    AttemptStarted,
    Event,
    JobDeadLettered,
    JobSucceeded,
    LeaseExpired,
    LeaseRenewed,
    RetryScheduled,
    StaleReportIgnored,
)
from schemas.records import Attempt, Failure
from schemas.types import to_utc_millis

MAX_STALE_TRACES = 16
MONITOR_COMMANDS = typing.get_args(MonitorCommand)
SUCCESS_OUTCOMES = frozenset({AttemptOutcome.FETCHED, AttemptOutcome.NOT_MODIFIED, AttemptOutcome.CACHE_HIT})


def decide(state: State, command: Command, now: datetime, policy: Policy) -> list[Event]:  # noqa: C901 - one flat case per command type
    """The events that follow from `command` given the job's current `state`.

    `now` is the command's own time (its record timestamp), so a redelivered command decides the same.
    """
    command_id = command_id_of(command)
    if state is not None and command_id in state.recent_command_ids:
        return []
    now = to_utc_millis(now)
    if isinstance(command, SubmitJob):
        return decide_submit(state, command, command_id, now, policy)
    if isinstance(command, CreateMonitor):
        return decide_create(state, command, command_id, now, policy.first_check_spread_s)
    emit = Emitter(command_id, command.job_id, 0 if state is None else state.sequence, now)
    if isinstance(state, Monitor):
        if isinstance(command, MONITOR_COMMANDS):
            decide_monitor(state, command, emit)
        elif isinstance(command, CheckTimers):
            decide_monitor(state, command, emit)
            check_callbacks(state.callbacks, emit, policy)
        elif isinstance(command, ReportCallback):
            report_callback(state.callbacks, command, emit, policy)
        elif isinstance(command, ReplayCallback):
            replay_change(state, command, emit)
        elif isinstance(command, PurgeAuditRecords):  # a monitor's audit records age out as a job's do
            purge_audit(state, command, emit)
        return emit.events
    job = accepted_job(state)
    match command:
        case CancelJob() | RedriveJob() | DeleteJobHistory() | ReplayCallback():
            mutate(job, command, emit, policy)
        case RecordAudit():
            record_audit(state, command, emit)
        case PurgeAuditRecords():
            purge_audit(state, command, emit)
        case ReportAttempt():
            _report(job, command.attempt, emit, policy)
        case RenewLease():
            _renew(job, command, emit, policy)
        case StartAttempt():
            _start(job, command, emit, policy)
        case CheckTimers():
            _check_timers(job, emit, policy)
            check_callbacks(() if state is None else state.callbacks, emit, policy)
        case ReportCallback():
            report_callback(() if state is None else state.callbacks, command, emit, policy)
        case (
            EditMonitor()
            | PauseMonitor()
            | ResumeMonitor()
            | DeleteMonitor()
            | RecordCheck()
            | ReportCheckReading()
        ):
            pass  # no such monitor: the API answers 404 before it sends one
        case _:
            assert_never(command)
    return emit.events


def lease_refusal(state: Job | None, attempt_number: int, lease_id: UUID) -> str | None:
    """Why a report or renewal is stale (fencing), or None when it carries the current lease."""
    if state is None:
        return "no such job"
    if state.status is not JobStatus.LEASED or state.lease is None:
        return f"job is {state.status}, not leased"
    if (attempt_number, lease_id) != (state.lease.attempt_number, state.lease.lease_id):
        return f"current lease is attempt {state.lease.attempt_number}"
    return None


def _held(state: Job | None, kind: ReportKind, policy: Policy) -> str | None:
    """Why a start (or a remote executor's outcome of a run it never started) is refused because
    its type is switched off: the work waits, and its lease lapses uncharged."""
    if state is None or state.lease is None:
        return None
    off = policy.disabled_types.get(state.accepted.job_type)
    unstarted_remote = (
        kind is ReportKind.ATTEMPT
        and state.lease.started_at is None
        and state.accepted.job_type in policy.remote_types
    )
    if off is None or not (kind is ReportKind.START or unstarted_remote):
        return None
    return f"job type {state.accepted.job_type} is switched off ({off}): its work waits"


def _fenced(
    state: Job | None, kind: ReportKind, attempt_number: int, lease_id: UUID, emit: Emitter, policy: Policy
) -> Job | None:
    """The job when the sender holds its current lease (and its type may run); otherwise the report
    is recorded as stale."""
    stale = lease_refusal(state, attempt_number, lease_id) or _held(state, kind, policy)
    if stale is None and state is not None and state.lease is not None:
        return state
    # Stale reports grow no job without bound: each distinct one is traced once, and a few in all.
    traces = () if state is None else state.stale_traces
    if (kind, attempt_number, lease_id) not in traces and len(traces) < MAX_STALE_TRACES:
        emit(StaleReportIgnored, kind=kind, attempt_number=attempt_number, lease_id=lease_id, reason=stale)
    return None


def _report(current: Job | None, attempt: Attempt, emit: Emitter, policy: Policy) -> None:
    state = _fenced(current, ReportKind.ATTEMPT, attempt.attempt_number, attempt.lease_id, emit, policy)
    if state is None:
        return
    if attempt.outcome in SUCCESS_OUTCOMES and attempt.failure is None:
        emit(
            JobSucceeded, attempt_number=attempt.attempt_number, artifacts=attempt.artifacts, attempt=attempt
        )
        return
    emit(AttemptRecorded, attempt=attempt)
    failure = attempt.failure or Failure(
        code="UNKNOWN_FAILURE",
        disposition=FailureDisposition.TERMINAL,
        safe_message=f"attempt ended {attempt.outcome} without a failure",
    )
    failure = policy.routes.escalated(failure, state.accepted.transport_policy, (*state.attempts, attempt))
    if is_denial(attempt) and state.denials + 1 > policy.max_denials:
        emit(JobDeadLettered, failure=_bounded(failure, f"denied {state.denials + 1} times"))
        return
    spent = state.budget_spent + (0 if is_denial(attempt) else 1)
    _retry_or_dead_letter(state, failure, spent, emit, policy)


def _retry_or_dead_letter(
    state: Job, failure: Failure, budget_spent: int, emit: Emitter, policy: Policy
) -> None:
    """Backoff never earlier than Retry-After, never at or past the deadline, within the budget."""
    attempt_number = state.dispatch_count
    if failure.disposition is FailureDisposition.TERMINAL:
        emit(JobDeadLettered, failure=failure)
        return
    backoff_until = emit.now + policy.backoff(attempt_number)
    next_attempt_at = ceil_to_millis(max(backoff_until, failure.retry_at or backoff_until))
    if next_attempt_at >= state.accepted.deadline_at:
        emit(JobDeadLettered, failure=_deadline_failure(failure))
    elif budget_spent >= state.accepted.attempt_limit:
        emit(JobDeadLettered, failure=_bounded(failure, f"attempt budget of {budget_spent} spent"))
    else:
        emit(RetryScheduled, attempt_number=attempt_number, next_attempt_at=next_attempt_at, failure=failure)


def _deadline_failure(cause: Failure) -> Failure:
    return Failure(
        code="JOB_DEADLINE_EXCEEDED",
        disposition=FailureDisposition.TERMINAL,
        safe_message=f"the job deadline passes before a safe retry (last failure: {cause.code})",
    )


def _bounded(cause: Failure, why: str) -> Failure:
    """The last failure, made terminal by a bound the job reached."""
    return msgspec.structs.replace(
        cause,
        disposition=FailureDisposition.TERMINAL,
        retry_at=None,
        safe_message=f"{cause.safe_message} ({why})",
    )


def _renew(current: Job | None, command: RenewLease, emit: Emitter, policy: Policy) -> None:
    state = _fenced(current, ReportKind.RENEWAL, command.attempt_number, command.lease_id, emit, policy)
    if state is None:
        return
    emit(
        LeaseRenewed,
        attempt_number=command.attempt_number,
        lease_id=command.lease_id,
        lease_expires_at=_started_lease_until(state, emit.now, policy),
    )


def _start(current: Job | None, command: StartAttempt, emit: Emitter, policy: Policy) -> None:
    """The lease of started work runs from its start; a repeated start changes nothing."""
    state = _fenced(current, ReportKind.START, command.attempt_number, command.lease_id, emit, policy)
    if state is None or state.lease is None or state.lease.started_at is not None:
        return
    emit(
        AttemptStarted,
        attempt_number=command.attempt_number,
        lease_id=command.lease_id,
        lease_expires_at=_started_lease_until(state, emit.now, policy),
    )


def _started_lease_until(state: Job, now: datetime, policy: Policy) -> datetime:
    """A run with no runtime ceiling keeps its lease by renewing it, never past the job's deadline."""
    max_runtime_ms = state.accepted.max_runtime_ms
    until = now + timedelta(milliseconds=policy.lease_ms(max_runtime_ms))
    return until if max_runtime_ms else min(until, state.accepted.deadline_at)


def _check_timers(state: Job | None, emit: Emitter, policy: Policy) -> None:
    if state is None or state.is_terminal:
        return
    if state.status is JobStatus.LEASED and state.lease is not None:
        _reap(state, state.lease, emit, policy)
    elif emit.now >= state.accepted.deadline_at:
        emit(JobDeadLettered, failure=_deadline_failure(state.failure or _never_ran()))
    elif state.next_attempt_at is None or emit.now >= state.next_attempt_at:
        dispatch(state, emit, policy)


def _never_ran() -> Failure:
    return Failure(code="NOT_STARTED", disposition=FailureDisposition.TERMINAL, safe_message="no attempt ran")


def _reap(state: Job, lease: Lease, emit: Emitter, policy: Policy) -> None:
    """Expire a lapsed lease, or one further ahead than any registered type could ask for."""
    expires_at = lease.lease_expires_at
    if emit.now >= expires_at:
        reason = ExpiryReason.EXPIRED if lease.started_at is not None else ExpiryReason.NOT_STARTED
    elif expires_at - emit.now > timedelta(milliseconds=policy.lease_horizon_ms):
        reason = ExpiryReason.BEYOND_HORIZON
    else:
        return
    if reason is ExpiryReason.NOT_STARTED:
        _redispatch_unstarted(state, lease, emit, policy)
        return
    failure = Failure(
        code="LEASE_EXPIRED" if reason is ExpiryReason.EXPIRED else "LEASE_BEYOND_HORIZON",
        disposition=FailureDisposition.RETRYABLE,
        safe_message=f"attempt {lease.attempt_number} stopped reporting before its lease ended",
    )
    emit(
        LeaseExpired,
        attempt_number=lease.attempt_number,
        lease_id=lease.lease_id,
        lease_expires_at=expires_at,
        reason=reason,
        failure=failure,
    )
    _retry_or_dead_letter(state, failure, state.budget_spent + 1, emit, policy)


def _redispatch_unstarted(state: Job, lease: Lease, emit: Emitter, policy: Policy) -> None:
    """Work no executor started costs nothing: a fresh lease at once, unless the deadline passed."""
    failure = Failure(
        code="NOT_STARTED",
        disposition=FailureDisposition.RETRYABLE,
        safe_message=f"no executor started attempt {lease.attempt_number} within its start window",
    )
    emit(
        LeaseExpired,
        attempt_number=lease.attempt_number,
        lease_id=lease.lease_id,
        lease_expires_at=lease.lease_expires_at,
        reason=ExpiryReason.NOT_STARTED,
        failure=failure,
    )
    if emit.now >= state.accepted.deadline_at:
        emit(JobDeadLettered, failure=_deadline_failure(state.failure or failure))
    else:
        dispatch(state, emit, policy)
