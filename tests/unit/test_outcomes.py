from datetime import UTC, datetime, timedelta

import pytest

from projections.lifecycle.outcomes import LOCAL_FAILURES, local_failure, parse_retry_after, status_failure
from schemas.enums import FailureDisposition

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("status", [200, 201, 204])
def test_usable_statuses_are_not_failures(status):
    assert status_failure(status, None, NOW) is None


def test_a_304_to_a_request_without_validators_is_a_typed_failure_never_a_success():
    failure = status_failure(304, None, NOW)
    assert failure is not None
    assert failure.code == "UNEXPECTED_NOT_MODIFIED"
    assert failure.disposition is FailureDisposition.TERMINAL


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
        ("1000000000000", NOW + timedelta(days=1)),
        ("9" * 400, NOW + timedelta(days=1)),
        ("Sunday, 29-Nov-26 12:00:30 GMT", NOW + timedelta(seconds=30)),
        ("Sun Nov 29 12:00:30 2026", NOW + timedelta(seconds=30)),
        ("Sun Nov  1 12:00:30 2026", NOW),
        ("Fri, 31 Dec 9999 23:59:59 GMT", NOW + timedelta(days=1)),
        ("soon", None),
        ("-5", None),
        ("", None),
        (None, None),
        ("\u0661\u0662", None),  # Arabic-Indic digits are digits to Python, not to RFC 9110
        ("\uff11\uff12", None),
        ("1.5", None),
        ("+5", None),
        ("5 s", None),
        ("Sun, 29 Nov 2026 12:00:30 UTC", None),
        ("sun, 29 nov 2026 12:00:30 GMT", None),
        ("Sun, 31 Feb 2026 12:00:30 GMT", None),
        ("Sun, 29 Nov 2026 25:00:30 GMT", None),
        ("Sun, 29 Nov 2026 12:00:30 +0000", None),
        ("29 Nov 2026 12:00:30 GMT", None),
    ],
)
def test_retry_after_accepts_exactly_the_forms_of_rfc_9110(header, expected):
    assert parse_retry_after(header, NOW) == expected


def test_retry_after_is_clamped_to_the_job_deadline():
    deadline = NOW + timedelta(minutes=5)
    assert parse_retry_after("3600", NOW, deadline) == deadline
    assert parse_retry_after("60", NOW, deadline) == NOW + timedelta(seconds=60)
    assert status_failure(503, "1000000000000", NOW, deadline).retry_at == deadline


def test_a_two_digit_rfc_850_year_more_than_50_years_ahead_is_in_the_past_century():
    assert parse_retry_after("Thursday, 01-Jan-99 00:00:00 GMT", NOW) == NOW


def test_retry_after_is_carried_on_a_retryable_failure():
    assert status_failure(429, "2", NOW).retry_at == NOW + timedelta(seconds=2)


@pytest.mark.parametrize(
    ("code", "retryable"),
    [
        ("TIMEOUT", True),
        ("CONNECTION_FAILED", True),
        ("ADDRESS_REFUSED", False),
        ("BODY_TOO_LARGE", False),
        ("WORKER_STOPPED", True),
    ],
)
def test_local_failures_are_typed(code, retryable):
    _, failure = local_failure(code, "detail")
    assert (failure.disposition is FailureDisposition.RETRYABLE) is retryable
    assert failure.safe_message.endswith(": detail")
    assert code in LOCAL_FAILURES
