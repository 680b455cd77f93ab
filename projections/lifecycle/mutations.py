"""Who may change a job, and how: cancel, redrive, history delete, and audited reads.

An accepted mutation appends its events and one `AuditRecorded` to the job. A refused one leaves
the job untouched: its audit record goes to the actor's own audit stream (`refusal_of`), which
keeps at most `MAX_AUDIT_RECORDS` an hour, so no principal can grow another's job or dedupe window.
The actor and role are the command's, which intake sets from the verified principal when auth is on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import assert_never
from uuid import UUID

from projections.lifecycle.audit import CONFLICT, FORBIDDEN, INVALID, NOT_FOUND, audit
from projections.lifecycle.dispatch import dispatch
from projections.lifecycle.emit import Emitter, command_id_of
from projections.lifecycle.evolve import evolve
from projections.lifecycle.identity import (
    audit_stream_id,
    callback_url_problem,
    job_target,
    monitor_target,
    name_based,
    shown_url,
)
from projections.lifecycle.limits import (
    MAX_ACTOR_BYTES,
    MAX_MESSAGE_BYTES,
    MAX_REASON_BYTES,
    clip,
    oversized_field,
)
from projections.lifecycle.monitors import (
    CHANGING_MONITORS,
    MONITOR_ACTIONS,
    ChangingMonitor,
    change_refusal,
    creation_refusal,
    monitor_actor,
    monitor_id_for,
    name_problem,
    name_taken,
    spec_problem,
)
from projections.lifecycle.policy import Policy
from projections.lifecycle.state import TERMINAL_STATUSES, Job, Monitor, State, Unaccepted, accepted_job
from schemas.commands import (
    CancelJob,
    Command,
    CreateMonitor,
    DeleteJobHistory,
    DeleteMonitor,
    EditMonitor,
    MutationCommand,
    RecordAudit,
    RedriveJob,
    ReplayCallback,
)
from schemas.enums import ActorRole, AuditAction, AuditOutcome, CacheMode, JobStatus
from schemas.events import CallbackReplayed, JobCancelled, JobHistoryDeleted, JobRedriven

CANCELLING_ROLES = frozenset({ActorRole.SERVICE, ActorRole.OPERATOR, ActorRole.ADMIN})
REDRIVING_ROLES = frozenset({ActorRole.ADMIN})
DELETING_ROLES = frozenset({ActorRole.ADMIN})
REPLAYING_ROLES = frozenset({ActorRole.OPERATOR, ActorRole.ADMIN})
MAX_AUDIT_RECORDS = 1_000  # per principal and hour; what comes later is counted, not recorded
ACTIONS: dict[type[MutationCommand], AuditAction] = {
    CancelJob: AuditAction.JOB_CANCEL,
    RedriveJob: AuditAction.JOB_REDRIVE,
    DeleteJobHistory: AuditAction.JOB_HISTORY_DELETE,
    ReplayCallback: AuditAction.CALLBACK_REPLAY,
}
MUTATIONS = (CancelJob, RedriveJob, DeleteJobHistory, ReplayCallback)


@dataclass(frozen=True)
class Refusal:
    """Why a mutation was refused; `kind` is one of FORBIDDEN, NOT_FOUND, CONFLICT, INVALID."""

    kind: str
    detail: str


def mutate(state: Job | None, command: MutationCommand, emit: Emitter, policy: Policy) -> None:
    """An allowed mutation's events and audit record; a refused one adds nothing here (`refusal_of`)."""
    job, denial = _checked(state, command, emit.now)
    if job is None or denial is not None:
        return
    match command:
        case CancelJob():
            emit(
                JobCancelled, actor_id=_actor(command), actor_role=command.actor_role, reason=_reason(command)
            )
            _audit(emit, command, "cancelled")
        case RedriveJob():
            _redrive(job, command, emit, policy)
        case DeleteJobHistory():
            emit(
                JobHistoryDeleted,
                actor_id=_actor(command),
                actor_role=command.actor_role,
                reason=_reason(command),
            )
            _audit(emit, command, "history deleted")
        case ReplayCallback():
            url = replay_url(job, command) or ""
            emit(
                CallbackReplayed,
                actor_id=_actor(command),
                actor_role=command.actor_role,
                reason=_reason(command),
                webhook_id=job.completion_webhook_id or "",
                callback_url=url,
            )
            _audit(emit, command, f"callback replayed to {clip(shown_url(url), 256)}")
        case _:
            assert_never(command)


def offered_mutations(role: ActorRole, status: JobStatus) -> frozenset[AuditAction]:
    """What a console offers `role` on a job in `status` that it may read; a hint only: the
    lifecycle decides each command as it comes."""
    if status is JobStatus.REJECTED:
        return frozenset()
    terminal = status in TERMINAL_STATUSES
    offered = {
        AuditAction.JOB_CANCEL: role in CANCELLING_ROLES and not terminal,
        AuditAction.JOB_REDRIVE: role in REDRIVING_ROLES and status is JobStatus.DEAD_LETTER,
        AuditAction.JOB_HISTORY_DELETE: role in DELETING_ROLES and terminal,
    }
    return frozenset(action for action, allowed in offered.items() if allowed)


def refusal_of(state: State, command: Command, now: datetime) -> RecordAudit | None:
    """A public mutation (of a job or a monitor) that will not go ahead, as the audit command for its
    actor's audit stream; None for any other command."""
    if isinstance(command, CHANGING_MONITORS):
        return monitor_refusal_of(state, command, now)
    if not isinstance(command, CancelJob | RedriveJob | DeleteJobHistory | ReplayCallback):
        return None
    if state is not None and command_id_of(command) in state.recent_command_ids:
        return None  # decided already: a redelivery is nothing new
    if isinstance(state, Monitor):
        denial = _envelope_denial(command, now) or _monitor_denial(state, command)
    else:
        _, denial = _checked(accepted_job(state), command, now)
    if denial is None:
        return None
    return _refused(command, command.actor_id, command.actor_role, denial, now, job_target(command.job_id))


def monitor_refusal_of(state: State, command: ChangingMonitor, now: datetime) -> RecordAudit | None:
    """A monitor's creation or change that will not go ahead, as its actor's audit record."""
    if state is not None and command_id_of(command) in state.recent_command_ids:
        return None
    denial = monitor_denial(state, command, now)
    if denial is None:
        return None
    actor_id, actor_role = monitor_actor(command)
    target = monitor_target(target_monitor(command))
    return _refused(command, actor_id, actor_role, denial, now, target)


def monitor_denial(state: State, command: ChangingMonitor, now: datetime) -> Refusal | None:
    """Why a monitor's creation, edit, pause, resume or delete cannot go ahead, or None."""
    envelope = _sized(command.request_id, getattr(command, "reason", ""), monitor_actor(command)[0])
    if envelope is None and command.expires_at is not None and command.expires_at < now:
        envelope = Refusal(INVALID, f"the command expired at {command.expires_at.isoformat()}")
    if envelope is not None:
        return envelope
    if isinstance(command, CreateMonitor):
        return _creation_denial(state, command)
    if not isinstance(state, Monitor):
        return Refusal(NOT_FOUND, "no such monitor")
    refused = change_refusal(state, command.actor_id, command.actor_role)
    if refused is not None:
        hidden = command.actor_role is ActorRole.SERVICE  # another service's is answered as none
        return Refusal(NOT_FOUND, "no such monitor") if hidden else Refusal(FORBIDDEN, refused)
    if state.deleted and not isinstance(command, DeleteMonitor):
        return Refusal(CONFLICT, "the monitor is deleted")
    problem = spec_problem(command.spec) if isinstance(command, EditMonitor) else None
    return None if problem is None else Refusal(INVALID, problem)


def _creation_denial(state: State, command: CreateMonitor) -> Refusal | None:
    invalid = name_problem(command.caller_identity, command.name)
    if invalid is not None:
        return Refusal(INVALID, invalid)
    forbidden = creation_refusal(command)
    if forbidden is not None:
        return Refusal(FORBIDDEN, forbidden)
    if state is not None and not isinstance(state, Monitor):
        return Refusal(CONFLICT, "the monitor's id is another stream's")
    if isinstance(state, Monitor) and not state.deleted:
        if state.spec == command.spec:
            return None  # the same monitor again: nothing to do
        return Refusal(CONFLICT, name_taken(command))
    problem = spec_problem(command.spec)
    return None if problem is None else Refusal(INVALID, problem)


def target_monitor(command: ChangingMonitor) -> UUID:
    if isinstance(command, CreateMonitor):
        return monitor_id_for(command.caller_identity, command.name)
    return command.monitor_id


def _refused(
    command: MutationCommand | ChangingMonitor,
    actor_id: str,
    actor_role: ActorRole,
    denial: Refusal,
    now: datetime,
    target: str,
) -> RecordAudit:
    actor = clip(actor_id, MAX_ACTOR_BYTES)
    return RecordAudit(
        command_id=name_based(command_id_of(command), "refused"),
        job_id=audit_stream_id(actor, now),
        actor_id=actor,
        actor_role=actor_role,
        action=ACTIONS[type(command)] if isinstance(command, MUTATIONS) else MONITOR_ACTIONS[type(command)],
        outcome=AuditOutcome.DENIED,
        detail=clip(denial.detail, MAX_MESSAGE_BYTES),
        target=target,
        request_id=clip(command.request_id, MAX_ACTOR_BYTES),
        refusal=denial.kind,
        reason=clip(getattr(command, "reason", ""), MAX_REASON_BYTES),
    )


def _redrive(job: Job, command: RedriveJob, emit: Emitter, policy: Policy) -> None:
    redriven = emit(
        JobRedriven,
        actor_id=_actor(command),
        actor_role=command.actor_role,
        reason=_reason(command),
        deadline_at=command.deadline_at or job.accepted.deadline_at,
        budget_spent_before=job.charged_attempts,
        cache_mode=command.cache_mode or CacheMode.BYPASS,  # the origin was fixed: ask it again
    )
    after = evolve(job, redriven)
    if isinstance(after, Job):
        dispatch(after, emit, policy)
    _audit(emit, command, "redriven with a fresh attempt budget")


def record_audit(state: State, command: RecordAudit, emit: Emitter) -> None:
    """An audit record in a principal's audit stream, up to `MAX_AUDIT_RECORDS` an hour: the last
    one recorded says so, and later ones are left out (counted by the worker)."""
    recorded = state.audit_records if isinstance(state, Unaccepted) else 0
    if recorded > MAX_AUDIT_RECORDS:
        return
    detail = command.detail
    if recorded == MAX_AUDIT_RECORDS:
        detail = (
            f"{MAX_AUDIT_RECORDS} records this hour: this principal's further ones are counted, not recorded"
        )
    audit(
        emit,
        actor_id=command.actor_id,
        actor_role=command.actor_role,
        action=command.action,
        outcome=command.outcome,
        detail=detail,
        target=command.target,
        refusal=command.refusal,
        reason=command.reason,
        request_id=command.request_id,
    )


def mutation_refusal(state: Job | None, command: MutationCommand, now: datetime) -> Refusal | None:
    """Why the lifecycle would refuse `command` on `state` now, or None: asked before anything
    the command would set off outside the lifecycle (a job type's history veto)."""
    return _checked(state, command, now)[1]


def _checked(state: Job | None, command: MutationCommand, now: datetime) -> tuple[Job | None, Refusal | None]:
    """The job, or why the mutation cannot go ahead: its size or age, no such job, or its rules."""
    envelope = _envelope_denial(command, now)
    if envelope is not None:
        return None, envelope
    job = state
    if job is None or _hidden_from(job, command):
        return None, Refusal(NOT_FOUND, "no such job")  # another service's job is answered as none
    match command:
        case CancelJob():
            denial = _cancel_denial(job, command)
        case RedriveJob():
            denial = _redrive_denial(job, command, now)
        case DeleteJobHistory():
            denial = _delete_denial(job, command)
        case ReplayCallback():
            denial = _replay_denial(job, command)
        case _:
            assert_never(command)
    return job, denial


def _envelope_denial(command: MutationCommand, now: datetime) -> Refusal | None:
    """A mutation too large to record, or past its expiry."""
    too_large = _sized(command.request_id, command.reason, command.actor_id)
    if too_large is not None:
        return too_large
    if command.expires_at is not None and command.expires_at < now:
        return Refusal(INVALID, f"the command expired at {command.expires_at.isoformat()}")
    return None


def _sized(request_id: str, reason: str, actor_id: str) -> Refusal | None:
    too_large = oversized_field(
        {
            "reason": (reason, MAX_REASON_BYTES),
            "actor_id": (actor_id, MAX_ACTOR_BYTES),
            "request_id": (request_id, MAX_ACTOR_BYTES),
        }
    )
    return None if too_large is None else Refusal(INVALID, too_large)


def _monitor_denial(monitor: Monitor, command: MutationCommand) -> Refusal | None:
    """Why a mutation of a monitor cannot go ahead: only its latest change's callback is replayed."""
    if not isinstance(command, ReplayCallback):
        return Refusal(NOT_FOUND, "no such job")  # a monitor is no job
    if command.actor_role is ActorRole.SERVICE and command.actor_id != monitor.owner:
        return Refusal(NOT_FOUND, "no such job")  # another service's is answered as an id nothing has
    if command.actor_role not in REPLAYING_ROLES:
        return Refusal(FORBIDDEN, f"role {command.actor_role} may not replay callbacks; OPERATOR, ADMIN may")
    if monitor.last_change is None:
        return Refusal(CONFLICT, "the monitor has found no change yet: there is no callback to replay")
    if monitor.callbacks:
        return Refusal(CONFLICT, "a change's callback is still being delivered")
    url = command.callback_url or monitor.spec.callback_url
    if url is None:
        return Refusal(INVALID, "the monitor has no callback URL: give one to deliver to")
    problem = callback_url_problem(url)
    return None if problem is None else Refusal(INVALID, problem)


def replay_change(monitor: Monitor, command: ReplayCallback, emit: Emitter) -> None:
    """The monitor's latest change delivered again, under its first webhook-id, and audited."""
    if (
        _envelope_denial(command, emit.now)
        or _monitor_denial(monitor, command)
        or monitor.last_change is None
    ):
        return
    url = command.callback_url or monitor.spec.callback_url or ""
    emit(
        CallbackReplayed,
        actor_id=_actor(command),
        actor_role=command.actor_role,
        reason=_reason(command),
        webhook_id=monitor.last_change_webhook_id or "",
        callback_url=url,
    )
    _audit(
        emit, command, f"callback replayed to {clip(shown_url(url), 256)}", monitor_target(monitor.monitor_id)
    )


def _hidden_from(job: Job, command: MutationCommand) -> bool:
    return command.actor_role is ActorRole.SERVICE and command.actor_id != job.accepted.caller_identity


def shown_to(state: State, command: MutationCommand) -> bool:
    """Whether the mutation's actor may learn anything of the job, its status included."""
    job = accepted_job(state)
    return job is not None and not _hidden_from(job, command)


def _cancel_denial(job: Job, command: CancelJob) -> Refusal | None:
    if command.actor_role not in CANCELLING_ROLES:
        return Refusal(FORBIDDEN, f"role {command.actor_role} may not cancel jobs")
    if job.is_terminal:
        return Refusal(CONFLICT, f"job is already {job.status}")
    return None


def _redrive_denial(job: Job, command: RedriveJob, now: datetime) -> Refusal | None:
    if command.actor_role not in REDRIVING_ROLES:
        return Refusal(FORBIDDEN, f"role {command.actor_role} may not redrive jobs; ADMIN may")
    if job.status is not JobStatus.DEAD_LETTER:
        return Refusal(CONFLICT, f"job is {job.status}, not DEAD_LETTER")
    deadline_at = command.deadline_at or job.accepted.deadline_at
    if deadline_at <= now:
        return Refusal(INVALID, "the job's deadline has passed: give a new deadline")
    return None


def _delete_denial(job: Job, command: DeleteJobHistory) -> Refusal | None:
    if command.actor_role not in DELETING_ROLES:
        return Refusal(FORBIDDEN, f"role {command.actor_role} may not delete history; ADMIN may")
    return _still_active(job)


def _replay_denial(job: Job, command: ReplayCallback) -> Refusal | None:
    if command.actor_role not in REPLAYING_ROLES:
        return Refusal(FORBIDDEN, f"role {command.actor_role} may not replay callbacks; OPERATOR, ADMIN may")
    if not job.is_terminal or job.completion_webhook_id is None:
        return Refusal(CONFLICT, f"job is {job.status}: its callback is sent when it ends")
    if job.callbacks:
        return Refusal(CONFLICT, "its callback is still being delivered")
    url = replay_url(job, command)
    if url is None:
        return Refusal(INVALID, "the job has no callback URL: give one to deliver to")
    problem = callback_url_problem(url)
    return None if problem is None else Refusal(INVALID, problem)


def replay_url(job: Job, command: ReplayCallback) -> str | None:
    """Where a replay delivers: the URL it names, else the job's own."""
    return command.callback_url or job.accepted.callback_url


def _still_active(job: Job) -> Refusal | None:
    """Fail closed: a job that can still run, or still owes a callback, keeps its history."""
    if not job.is_terminal:
        return Refusal(CONFLICT, f"job is {job.status} and can still run")
    if job.callbacks:
        return Refusal(CONFLICT, "its callback is still being delivered")
    return None


def retention_expired(job: Job, cutoff: datetime) -> bool:
    """Whether maintenance may purge the job's history: finished, owing nothing, completed by `cutoff`."""
    return _still_active(job) is None and job.completed_at is not None and job.completed_at <= cutoff


def _actor(command: MutationCommand) -> str:
    return clip(command.actor_id, MAX_ACTOR_BYTES)


def _reason(command: MutationCommand) -> str:
    return clip(command.reason, MAX_REASON_BYTES)


def _audit(emit: Emitter, command: MutationCommand, done: str, target: str | None = None) -> None:
    audit(
        emit,
        actor_id=command.actor_id,
        actor_role=command.actor_role,
        action=ACTIONS[type(command)],
        outcome=AuditOutcome.ALLOWED,
        detail=done,
        target=target or job_target(emit.job_id),
        reason=command.reason,
        request_id=command.request_id,
    )
