"""Times as typed on the command line."""

from datetime import UTC, datetime, timedelta

import pytest

from streams.errors import UsageError
from streams.moments import moment_of

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", NOW - timedelta(seconds=90)),
        ("30m", NOW - timedelta(minutes=30)),
        ("1h", NOW - timedelta(hours=1)),
        ("1.5h", NOW - timedelta(minutes=90)),
        ("2d", NOW - timedelta(days=2)),
        ("2026-12-01T08:00:00Z", datetime(2026, 12, 1, 8, tzinfo=UTC)),
        ("2026-12-01T08:00:00+01:00", datetime(2026, 12, 1, 7, tzinfo=UTC)),
        ("2026-12-01T08:00", datetime(2026, 12, 1, 8, tzinfo=UTC)),
    ],
)
def test_a_duration_or_an_rfc_3339_time_names_a_moment(text, expected):
    assert moment_of(text, NOW) == expected


@pytest.mark.parametrize("text", ["", "1w", "yesterday", "-1h", "1 h"])
def test_anything_else_is_a_usage_mistake_that_says_what_is_taken(text):
    with pytest.raises(UsageError, match="neither a duration"):
        moment_of(text, NOW)
