"""The principals most end-to-end tests sign in as: one of each role and three services."""

from __future__ import annotations

import json

from schemas.enums import ActorRole
from streams.auth.issue import IssuedPrincipal, issue

ROLES = {
    "admin": ActorRole.ADMIN,
    "operator": ActorRole.OPERATOR,
    "viewer": ActorRole.VIEWER,
    "svc-a": ActorRole.SERVICE,
    "svc-b": ActorRole.SERVICE,
    "svc-c": ActorRole.SERVICE,
}
ISSUED: dict[str, IssuedPrincipal] = {name: issue(name, role) for name, role in ROLES.items()}
PRINCIPALS = json.dumps({"principals": [issued.entry for issued in ISSUED.values()]})
