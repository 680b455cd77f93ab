"""The one way an `AuditRecorded` is written: who, in which role, did what to what, and how it ended."""

from __future__ import annotations

from uuid import UUID, uuid5

from projections.lifecycle.emit import Emitter
from projections.lifecycle.limits import MAX_ACTOR_BYTES, MAX_MESSAGE_BYTES, MAX_REASON_BYTES, clip
from projections.lifecycle.state import State
from schemas.commands import PurgeAuditRecords
from schemas.enums import ActorRole, AuditAction, AuditOutcome
from schemas.events import AuditRecorded, AuditRecordsPurged
from schemas.types import to_utc_millis

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


def purge_audit(state: State, command: PurgeAuditRecords, emit: Emitter) -> None:
    """An ADMIN's (maintenance's) retention: the audit records of a history written before `before`
    go, never those of the current hour, whose audit stream still bounds its principal's records."""
    if state is None or command.actor_role is not ActorRole.ADMIN:
        return
    this_hour = emit.now.replace(minute=0, second=0, microsecond=0)
    emit(
        AuditRecordsPurged,
        before=min(to_utc_millis(command.before), this_hour),
        actor_id=clip(command.actor_id, MAX_ACTOR_BYTES),
        actor_role=command.actor_role,
        reason=clip(command.reason, MAX_REASON_BYTES),
    )
