"""Who may change a job, and how: cancel, redrive, history delete, and audited reads.

Every accepted or refused mutation ends in one `AuditRecorded`; the actor and role are the
command's, which intake sets from the verified principal when auth is on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import assert_never

from projections.lifecycle.audit import CONFLICT, FORBIDDEN, INVALID, NOT_FOUND, audit
from projections.lifecycle.dispatch import dispatch
from projections.lifecycle.emit import Emitter
from projections.lifecycle.evolve import evolve
from projections.lifecycle.identity import job_target
from projections.lifecycle.limits import (
    MAX_ACTOR_BYTES,
    MAX_REASON_BYTES,
    clip,
    oversized_field,
)
from projections.lifecycle.policy import Policy
from projections.lifecycle.state import Job, accepted_job
from schemas.commands import CancelJob, DeleteJobHistory, MutationCommand, RecordAudit, RedriveJob
from schemas.enums import ActorRole, AuditAction, AuditOutcome, JobStatus
from schemas.events import JobCancelled, JobHistoryDeleted, JobRedriven
from schemas.types import to_utc_millis

CANCELLING_ROLES = frozenset({ActorRole.SERVICE, ActorRole.OPERATOR, ActorRole.ADMIN})


@dataclass(frozen=True)
class Refusal:
    """Why a mutation was refused; `kind` is one of FORBIDDEN, NOT_FOUND, CONFLICT, INVALID."""

    kind: str
    detail: str


def mutate(state: Job | None, command: MutationCommand | RecordAudit, emit: Emitter, policy: Policy) -> None:
    match command:
        case CancelJob():
            _cancel(state, command, emit)
        case RedriveJob():
            _redrive(state, command, emit, policy)
        case DeleteJobHistory():
            _delete_history(state, command, emit)
        case RecordAudit():
            _record_audit(command, emit)
        case _:
            assert_never(command)


def _cancel(state: Job | None, command: CancelJob, emit: Emitter) -> None:
    job, denial = _checked(state, command)
    denial = denial or _cancel_denial(job, command)
    if job is not None and denial is None:
        emit(JobCancelled, actor_id=_actor(command), actor_role=command.actor_role, reason=_reason(command))
    _audit(emit, command, AuditAction.JOB_CANCEL, denial, "cancelled")


def _redrive(state: Job | None, command: RedriveJob, emit: Emitter, policy: Policy) -> None:
    job, denial = _checked(state, command)
    denial = denial or _redrive_denial(job, command, emit.now)
    if job is not None and denial is None:
        redriven = emit(
            JobRedriven,
            actor_id=_actor(command),
            actor_role=command.actor_role,
            reason=_reason(command),
            deadline_at=to_utc_millis(command.deadline_at or job.accepted.deadline_at),
            budget_spent_before=job.charged_attempts,
        )
        after = evolve(job, redriven)
        if isinstance(after, Job):
            dispatch(after, emit, policy)
    _audit(emit, command, AuditAction.JOB_REDRIVE, denial, "redriven with a fresh attempt budget")


def _delete_history(state: Job | None, command: DeleteJobHistory, emit: Emitter) -> None:
    job, denial = _checked(state, command)
    denial = denial or _delete_denial(job, command)
    if job is not None and denial is None:
        emit(
            JobHistoryDeleted,
            actor_id=_actor(command),
            actor_role=command.actor_role,
            reason=_reason(command),
        )
    _audit(emit, command, AuditAction.JOB_HISTORY_DELETE, denial, "history deleted")


def _record_audit(command: RecordAudit, emit: Emitter) -> None:
    audit(
        emit,
        actor_id=command.actor_id,
        actor_role=command.actor_role,
        action=command.action,
        outcome=command.outcome,
        detail=command.detail,
        target=command.target,
        request_id=command.request_id,
    )


def _checked(state: Job | None, command: MutationCommand) -> tuple[Job | None, Refusal | None]:
    """The job, or why no mutation of this shape can go ahead: its size, or no such job."""
    too_large = oversized_field(
        {
            "reason": (command.reason, MAX_REASON_BYTES),
            "actor_id": (command.actor_id, MAX_ACTOR_BYTES),
            "request_id": (command.request_id, MAX_ACTOR_BYTES),
        }
    )
    if too_large is not None:
        return None, Refusal(INVALID, too_large)
    job = accepted_job(state)
    return job, None if job is not None else Refusal(NOT_FOUND, "no such job")


def _cancel_denial(job: Job | None, command: CancelJob) -> Refusal | None:
    if job is None:
        return None
    if command.actor_role not in CANCELLING_ROLES:
        return Refusal(FORBIDDEN, f"role {command.actor_role} may not cancel jobs")
    if command.actor_role is ActorRole.SERVICE and command.actor_id != job.accepted.caller_identity:
        return Refusal(FORBIDDEN, "a service may cancel only jobs it submitted")
    if job.is_terminal:
        return Refusal(CONFLICT, f"job is already {job.status}")
    return None


def _redrive_denial(job: Job | None, command: RedriveJob, now: datetime) -> Refusal | None:
    if job is None:
        return None
    if command.actor_role is not ActorRole.ADMIN:
        return Refusal(FORBIDDEN, f"role {command.actor_role} may not redrive jobs; ADMIN may")
    if job.status is not JobStatus.DEAD_LETTER:
        return Refusal(CONFLICT, f"job is {job.status}, not DEAD_LETTER")
    deadline_at = command.deadline_at or job.accepted.deadline_at
    if deadline_at <= now:
        return Refusal(INVALID, "the job's deadline has passed: give a new deadline")
    return None


def _delete_denial(job: Job | None, command: DeleteJobHistory) -> Refusal | None:
    if job is None:
        return None
    if command.actor_role is not ActorRole.ADMIN:
        return Refusal(FORBIDDEN, f"role {command.actor_role} may not delete history; ADMIN may")
    return _still_active(job)


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


def _audit(
    emit: Emitter, command: MutationCommand, action: AuditAction, denial: Refusal | None, done: str
) -> None:
    audit(
        emit,
        actor_id=command.actor_id,
        actor_role=command.actor_role,
        action=action,
        outcome=AuditOutcome.ALLOWED if denial is None else AuditOutcome.DENIED,
        detail=done if denial is None else denial.detail,
        target=job_target(emit.job_id),
        refusal="" if denial is None else denial.kind,
        reason=command.reason,
        request_id=command.request_id,
    )
