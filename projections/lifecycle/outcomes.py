"""Fetch outcomes as typed failures: what may be retried, and when at the earliest.

429, 5xx, timeouts and connection errors are retryable; other 4xx and every local refusal
(blocked address, oversized body, too many redirects) are not.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

from schemas.enums import AttemptOutcome, FailureDisposition
from schemas.records import Failure

RETRYABLE_STATUSES = frozenset({408, 425, 429})
MAX_RETRY_AFTER = timedelta(days=1)

LOCAL_FAILURES: dict[str, tuple[AttemptOutcome, FailureDisposition, str]] = {
    "TIMEOUT": (AttemptOutcome.TIMEOUT, FailureDisposition.RETRYABLE, "the fetch did not finish in time"),
    "CONNECTION_FAILED": (AttemptOutcome.NETWORK_ERROR, FailureDisposition.RETRYABLE, "could not connect"),
    "DNS_FAILED": (
        AttemptOutcome.NETWORK_ERROR,
        FailureDisposition.RETRYABLE,
        "the host name did not resolve",
    ),
    "PROTOCOL_ERROR": (AttemptOutcome.NETWORK_ERROR, FailureDisposition.RETRYABLE, "the origin broke HTTP"),
    "ADDRESS_REFUSED": (
        AttemptOutcome.BLOCKED,
        FailureDisposition.TERMINAL,
        "the target resolves to a private, loopback, link-local or metadata address",
    ),
    "BODY_TOO_LARGE": (
        AttemptOutcome.TOO_LARGE,
        FailureDisposition.TERMINAL,
        "the response exceeds the size cap",
    ),
    "TOO_MANY_REDIRECTS": (AttemptOutcome.HTTP_ERROR, FailureDisposition.TERMINAL, "too many redirects"),
    "INVALID_REDIRECT": (
        AttemptOutcome.HTTP_ERROR,
        FailureDisposition.TERMINAL,
        "a redirect pointed at a URL that may not be fetched",
    ),
    "UNSUPPORTED_JOB_TYPE": (
        AttemptOutcome.DENIED,
        FailureDisposition.TERMINAL,
        "no executor for this job type",
    ),
}


def parse_retry_after(value: str | None, now: datetime) -> datetime | None:
    """Retry-After as delay-seconds or an HTTP date; None when absent or unparseable; capped at a day."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        at = now + timedelta(seconds=int(text))
    else:
        try:
            at = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if at.tzinfo is None:
            return None
    return min(max(at, now), now + MAX_RETRY_AFTER)


def status_failure(status: int, retry_after: str | None, now: datetime) -> Failure | None:
    """None for a usable response (2xx, 304); a typed failure otherwise."""
    if 200 <= status < 300 or status == 304:
        return None
    retryable = status >= 500 or status in RETRYABLE_STATUSES
    return Failure(
        code=f"HTTP_{status}",
        disposition=FailureDisposition.RETRYABLE if retryable else FailureDisposition.TERMINAL,
        retry_at=parse_retry_after(retry_after, now) if retryable else None,
        safe_message=f"the origin answered HTTP {status}",
    )


def local_failure(code: str, detail: str = "") -> tuple[AttemptOutcome, Failure]:
    """A failure found on this side of the wire, by its code in `LOCAL_FAILURES`."""
    outcome, disposition, message = LOCAL_FAILURES[code]
    safe_message = f"{message}: {detail}" if detail else message
    return outcome, Failure(code=code, disposition=disposition, safe_message=safe_message)
