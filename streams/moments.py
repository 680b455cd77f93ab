"""Points in time as people type them on the command line: `90s`, `30m`, `1h`, `2d` ago, or RFC 3339."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from streams.errors import UsageError

_AGO = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def moment_of(text: str, now: datetime) -> datetime:
    """The time `text` names: a duration before `now`, or an RFC 3339 time (UTC unless it says)."""
    given = text.strip()
    ago = _AGO.match(given)
    if ago is not None:
        return now - timedelta(**{_UNITS[ago[2]]: float(ago[1])})
    try:
        at = datetime.fromisoformat(given.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"{text!r} is neither a duration (90s, 30m, 1h, 2d) nor an RFC 3339 time") from exc
    return as_utc(at)


def as_utc(at: datetime) -> datetime:
    """`at` itself when it names its offset, else read as UTC."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
