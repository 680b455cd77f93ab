from datetime import UTC, datetime, timedelta

import pytest

from projections.lifecycle.outcomes import LOCAL_FAILURES, local_failure, parse_retry_after, status_failure
from schemas.enums import FailureDisposition

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("status", [200, 201, 204, 304])
def test_usable_statuses_are_not_failures(status):
    assert status_failure(status, None, NOW) is None


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 408])
def test_429_and_5xx_are_retryable(status):
    failure = status_failure(status, None, NOW)
    assert failure.disposition is FailureDisposition.RETRYABLE
    assert failure.code == f"HTTP_{status}"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 451, 301])
def test_other_statuses_are_not_retryable(status):
    assert status_failure(status, "5", NOW).disposition is FailureDisposition.TERMINAL
    assert status_failure(status, "5", NOW).retry_at is None


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("2", NOW + timedelta(seconds=2)),
        (" 120 ", NOW + timedelta(seconds=120)),
        ("Sun, 29 Nov 2026 12:00:30 GMT", NOW + timedelta(seconds=30)),
        ("Sun, 29 Nov 2026 11:00:00 GMT", NOW),
        ("9999999", NOW + timedelta(days=1)),
        ("soon", None),
        ("-5", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_is_parsed_in_both_forms(header, expected):
    assert parse_retry_after(header, NOW) == expected


def test_retry_after_is_carried_on_a_retryable_failure():
    assert status_failure(429, "2", NOW).retry_at == NOW + timedelta(seconds=2)


@pytest.mark.parametrize(
    ("code", "retryable"),
    [("TIMEOUT", True), ("CONNECTION_FAILED", True), ("ADDRESS_REFUSED", False), ("BODY_TOO_LARGE", False)],
)
def test_local_failures_are_typed(code, retryable):
    _, failure = local_failure(code, "detail")
    assert (failure.disposition is FailureDisposition.RETRYABLE) is retryable
    assert failure.safe_message.endswith(": detail")
    assert code in LOCAL_FAILURES
