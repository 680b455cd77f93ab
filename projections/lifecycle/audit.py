"""The one way an `AuditRecorded` is written: who, in which role, did what to what, and how it ended.

A service creating a job as itself is audited by its `JobAccepted` (`audit_of`): the record a
separate event would hold follows from it, so the log does not carry it twice.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID, uuid5

from projections.lifecycle.emit import Emitter, held_event
from projections.lifecycle.identity import job_target
from projections.lifecycle.limits import MAX_ACTOR_BYTES, MAX_MESSAGE_BYTES, MAX_REASON_BYTES, clip
from projections.lifecycle.state import State
from schemas.commands import PurgeAuditRecords
from schemas.enums import ActorRole, AuditAction, AuditOutcome
from schemas.events import AuditRecorded, AuditRecordsPurged, Event, JobAccepted

# Why a refused request was refused; the HTTP API answers 403, 404, 409 and 400 for them.
FORBIDDEN, NOT_FOUND, CONFLICT, INVALID = "forbidden", "not_found", "conflict", "invalid"


def audit_id_of(command_id: UUID) -> UUID:
    """The id of the audit record a command writes: known to its sender before it is decided."""
    return uuid5(command_id, "audit")


def audit(
    emit: Emitter,
    *,
    actor_id: str,
    actor_role: ActorRole,
    action: AuditAction,
    outcome: AuditOutcome,
    detail: str,
    target: str,
    refusal: str = "",
    reason: str = "",
    request_id: str = "",
) -> None:
    """Every text is cut to its bound, so a hostile command cannot make the record oversized."""
    emit(
        AuditRecorded,
        audit_id=audit_id_of(emit.command_id),
        actor_id=clip(actor_id, MAX_ACTOR_BYTES),
        actor_role=actor_role,
        action=action,
        outcome=outcome,
        reason=clip(reason, MAX_REASON_BYTES),
        detail=clip(detail, MAX_MESSAGE_BYTES),
        request_id=clip(request_id, MAX_ACTOR_BYTES),
        refusal=refusal,
        target=clip(target, MAX_ACTOR_BYTES),
    )


def audited_by_acceptance(actor_id: str, actor_role: ActorRole, caller_identity: str) -> bool:
    """Whether an allowed creation's audit record is the one `audit_of` derives from its `JobAccepted`."""
    return actor_role is ActorRole.SERVICE and actor_id == caller_identity


def audit_of(event: Event) -> AuditRecorded | None:
    """The audit record an event is or stands for: itself, a creation's (from its `JobAccepted`), or none.

    A creation audited by an `AuditRecorded` of its own (another actor's, or one logged before
    acceptances stood for it) shares the derived record's id and time, so it takes its place."""
    if isinstance(event, AuditRecorded):
        return event
    if not isinstance(event, JobAccepted):
        return None
    return held_event(
        event,
        AuditRecorded,
        "audit",
        audit_id=audit_id_of(event.command_id),
        actor_id=clip(event.caller_identity, MAX_ACTOR_BYTES),
        actor_role=ActorRole.SERVICE,
        action=AuditAction.JOB_CREATE,
        outcome=AuditOutcome.ALLOWED,
        reason="",
        detail="created",
        request_id=clip(event.request_id, MAX_ACTOR_BYTES),
        target=job_target(event.job_id),
        refusal="",
    )


def listed_as_audit(event: Event) -> tuple[datetime, UUID] | None:
    """The time and audit id `audit_of(event)` is listed under, without making the record."""
    if isinstance(event, AuditRecorded):
        return event.occurred_at, event.audit_id
    if isinstance(event, JobAccepted):
        return event.occurred_at, audit_id_of(event.command_id)
    return None


def purge_audit(state: State, command: PurgeAuditRecords, emit: Emitter) -> None:
    """An ADMIN's (maintenance's) retention: the audit records of a history written before `before`
    go, never those of the current hour, whose audit stream still bounds its principal's records."""
    if state is None or command.actor_role is not ActorRole.ADMIN:
        return
    this_hour = emit.now.replace(minute=0, second=0, microsecond=0)
    emit(
        AuditRecordsPurged,
        before=min(command.before, this_hour),
        actor_id=clip(command.actor_id, MAX_ACTOR_BYTES),
        actor_role=command.actor_role,
        reason=clip(command.reason, MAX_REASON_BYTES),
    )
