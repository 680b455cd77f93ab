"""Who may read what: a service sees its own jobs; viewers, operators and admins see everything.

Mutations are decided by the lifecycle (`projections.lifecycle.mutations`); these are the read
rules the HTTP API applies before it answers.
"""

from __future__ import annotations

from schemas.enums import ActorRole

READERS_OF_EVERYTHING = frozenset({ActorRole.VIEWER, ActorRole.OPERATOR, ActorRole.ADMIN})


def job_read_refusal(name: str, role: ActorRole, caller_identity: str) -> str | None:
    """Why `name` may not read a job of `caller_identity`, or None."""
    if role in READERS_OF_EVERYTHING or caller_identity == name:
        return None
    return "a service may read only its own jobs"


def reads_own_only(role: ActorRole) -> bool:
    """A principal that may read only its own jobs is shown no other job a job's history names."""
    return role not in READERS_OF_EVERYTHING


def listing_caller(name: str, role: ActorRole, asked: str | None) -> tuple[str | None, str | None]:
    """The caller filter a listing runs with, or why it is refused: a service lists only its own."""
    if role in READERS_OF_EVERYTHING:
        return asked, None
    if asked not in (None, name):
        return None, "a service may list only its own jobs"
    return name, None


CONTROLLERS = frozenset({ActorRole.OPERATOR, ActorRole.ADMIN})


def control_refusal(role: ActorRole) -> str | None:
    """Why `role` may not switch a job type off or on, or None."""
    if role in CONTROLLERS:
        return None
    return "only operators and admins switch job types off and on"


def audit_read_refusal(role: ActorRole) -> str | None:
    if role in READERS_OF_EVERYTHING:
        return None
    return "the audit trail is for viewers, operators and admins"
