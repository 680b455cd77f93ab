"""What `worker` and `dev` check before they import or start anything else: every problem of their
settings named at once, not one per run."""

from __future__ import annotations

from streams.auth.peering import PeerKey, peer_secret
from streams.auth.principals import load_principals
from streams.errors import UsageError
from streams.settings import Settings

PEERING_UNSET = (
    "auth is on but no peer secret is set: give every worker the same SCRAPESTREAM_PEER_SECRET "
    "(or SCRAPESTREAM_PEER_SECRET_FILE), at least 32 random bytes"
)


def serving_problems(settings: Settings) -> list[str]:
    problems = []
    document = None if settings.principals is None else settings.principals.get_secret_value()
    try:
        load_principals(settings.auth_enabled, settings.principals_file, document)
    except UsageError as exc:
        problems.append(str(exc))
    try:
        secret = peer_secret(settings)
        if secret is not None:
            PeerKey(secret)
        elif settings.auth_enabled:
            problems.append(PEERING_UNSET)
    except UsageError as exc:
        problems.append(str(exc))
    return problems


def check_serving(settings: Settings) -> None:
    problems = serving_problems(settings)
    if problems:
        raise UsageError("cannot start:\n  " + "\n  ".join(problems))
