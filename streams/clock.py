"""The only place that reads wall time; everything else receives `now` as a value."""

from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)
