"""Fetch outcomes as typed failures: what may be retried, and when at the earliest.

429, 5xx, timeouts and connection errors are retryable; other 4xx and every local refusal
(blocked address, oversized body, too many redirects) are not. An unforeseen error is
retryable within the attempt budget, so it is counted and never re-run silently.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from projections.lifecycle.limits import clip
from schemas.enums import AttemptOutcome, FailureDisposition
from schemas.records import Failure

RETRYABLE_STATUSES = frozenset({408, 425, 429})
MAX_RETRY_AFTER = timedelta(days=1)
_RETRYABLE, _TERMINAL = FailureDisposition.RETRYABLE, FailureDisposition.TERMINAL

LOCAL_FAILURES: dict[str, tuple[AttemptOutcome, FailureDisposition, str]] = {
    "TIMEOUT": (AttemptOutcome.TIMEOUT, _RETRYABLE, "the fetch did not finish in time"),
    "CONNECTION_FAILED": (AttemptOutcome.NETWORK_ERROR, _RETRYABLE, "could not connect"),
    "CONNECTION_RESET": (AttemptOutcome.NETWORK_ERROR, _RETRYABLE, "the connection was reset"),
    "DNS_FAILED": (AttemptOutcome.NETWORK_ERROR, _RETRYABLE, "the host name did not resolve"),
    "PROTOCOL_ERROR": (AttemptOutcome.NETWORK_ERROR, _RETRYABLE, "the origin broke HTTP"),
    "DECODING_FAILED": (AttemptOutcome.NETWORK_ERROR, _RETRYABLE, "the body could not be decoded"),
    "TLS_FAILED": (AttemptOutcome.NETWORK_ERROR, _TERMINAL, "the TLS handshake or certificate failed"),
    "ADDRESS_REFUSED": (
        AttemptOutcome.BLOCKED,
        _TERMINAL,
        "the target resolves to a private, loopback, link-local or metadata address",
    ),
    "BODY_TOO_LARGE": (AttemptOutcome.TOO_LARGE, _TERMINAL, "the response exceeds the size cap"),
    "TOO_MANY_REDIRECTS": (AttemptOutcome.HTTP_ERROR, _TERMINAL, "too many redirects"),
    "REQUEST_BUDGET_SPENT": (
        AttemptOutcome.HTTP_ERROR,
        _RETRYABLE,
        "the attempt's requests were spent before the page, gone from storage, could be fetched again",
    ),
    "INVALID_REDIRECT": (
        AttemptOutcome.HTTP_ERROR,
        _TERMINAL,
        "a redirect pointed at a URL that may not be fetched",
    ),
    "INVALID_URL": (AttemptOutcome.HTTP_ERROR, _TERMINAL, "the URL cannot be requested"),
    "UNSUPPORTED_CONTENT_ENCODING": (
        AttemptOutcome.HTTP_ERROR,
        _TERMINAL,
        "the origin used a content encoding scrapestream does not decode",
    ),
    "UNSUPPORTED_JOB_TYPE": (AttemptOutcome.DENIED, _TERMINAL, "no executor for this job type"),
    "WORKER_STOPPED": (
        AttemptOutcome.DENIED,
        _RETRYABLE,
        "its worker stopped before the attempt began: the page was not requested",
    ),
    "ROBOTS_DISALLOWED": (AttemptOutcome.DENIED, _TERMINAL, "the origin's robots.txt disallows this URL"),
    "ROBOTS_UNAVAILABLE": (
        AttemptOutcome.DENIED,
        _RETRYABLE,
        "the origin's robots.txt could not be read, so the URL is not fetched for now",
    ),
    "ARTIFACT_STORE_FAILED": (AttemptOutcome.NETWORK_ERROR, _RETRYABLE, "the artifact could not be stored"),
    "FETCH_FAILED": (AttemptOutcome.NETWORK_ERROR, _RETRYABLE, "the fetch failed unexpectedly"),
    "RESULT_SCHEMA_MISMATCH": (
        AttemptOutcome.HTTP_ERROR,
        _TERMINAL,
        "the remote executor's result is not a record of the job type's result schema",
    ),
    "JOB_TYPE_FAILED": (AttemptOutcome.NETWORK_ERROR, _RETRYABLE, "the job type's run failed"),
    "RESULT_NOT_UPLOADED": (
        AttemptOutcome.NETWORK_ERROR,
        _RETRYABLE,
        "the remote executor reported a result_key under which nothing was uploaded for its attempt",
    ),
    "RENDER_FAILED": (AttemptOutcome.NETWORK_ERROR, _RETRYABLE, "the browser could not render the page"),
    "INVALID_SELECTOR": (
        AttemptOutcome.HTTP_ERROR,
        _TERMINAL,
        "the job's wait_selector is not CSS the browser can parse",
    ),
    "BROWSER_CRASHED": (AttemptOutcome.NETWORK_ERROR, _RETRYABLE, "the browser crashed while rendering"),
    "CREDENTIAL_UNAVAILABLE": (
        AttemptOutcome.DENIED,
        _RETRYABLE,
        "this worker does not hold the credential the job carries",
    ),
    "CREDENTIAL_NOT_ALLOWED": (
        AttemptOutcome.DENIED,
        _TERMINAL,
        "the job's credential may not be sent to this origin, or through this route",
    ),
    "BUDGET_EXHAUSTED": (AttemptOutcome.DENIED, _RETRYABLE, "the route's budget for this period is spent"),
    "RATE_LIMITED": (AttemptOutcome.DENIED, _RETRYABLE, "the route's request rate is at its limit"),
    "ROUTE_UNAVAILABLE": (AttemptOutcome.DENIED, _RETRYABLE, "no route the job may use is available"),
    "ROUTE_NOT_ALLOWED": (
        AttemptOutcome.DENIED,
        _TERMINAL,
        "no configured route serves the job's transport policy",
    ),
}

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_LONG_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_TIME = r"(\d{2}):(\d{2}):(\d{2})"
_IMF_FIXDATE = re.compile(rf"({'|'.join(_DAYS)}), (\d{{2}}) ({'|'.join(_MONTHS)}) (\d{{4}}) {_TIME} GMT")
_RFC850 = re.compile(rf"({'|'.join(_LONG_DAYS)}), (\d{{2}})-({'|'.join(_MONTHS)})-(\d{{2}}) {_TIME} GMT")
_ASCTIME = re.compile(rf"({'|'.join(_DAYS)}) ({'|'.join(_MONTHS)}) ([ \d]\d) {_TIME} (\d{{4}})")
_DELAY_SECONDS = re.compile(r"[0-9]+")


def parse_retry_after(value: str | None, now: datetime, latest: datetime | None = None) -> datetime | None:
    """Retry-After per RFC 9110 10.2.3 (delay-seconds or an HTTP-date); None when absent or malformed.

    The result is never before `now`, and never after `latest` (the job deadline) or a day away.
    """
    if value is None:
        return None
    text = value.strip()
    cap = now + MAX_RETRY_AFTER if latest is None else min(now + MAX_RETRY_AFTER, latest)
    if _DELAY_SECONDS.fullmatch(text):
        # Compare as integers first: a huge delay would overflow datetime arithmetic.
        seconds = int(text) if len(text) <= 12 else 10**12
        at = cap if seconds >= (cap - now).total_seconds() else now + timedelta(seconds=seconds)
    else:
        parsed = _http_date(text, now)
        if parsed is None:
            return None
        at = parsed
    return max(now, min(at, cap))


def _http_date(text: str, now: datetime) -> datetime | None:
    if match := _IMF_FIXDATE.fullmatch(text):
        _, day, month, year, hour, minute, second = match.groups()
    elif match := _RFC850.fullmatch(text):
        _, day, month, short_year, hour, minute, second = match.groups()
        year = str(_rfc850_year(int(short_year), now))
    elif match := _ASCTIME.fullmatch(text):
        _, month, day, hour, minute, second, year = match.groups()
    else:
        return None
    try:
        return datetime(
            int(year), _MONTHS.index(month) + 1, int(day), int(hour), int(minute), int(second), tzinfo=UTC
        )
    except ValueError:
        return None


def _rfc850_year(two_digits: int, now: datetime) -> int:
    """RFC 9110 5.6.7: a two-digit year more than 50 years ahead is in the past century."""
    year = now.year - now.year % 100 + two_digits
    return year - 100 if year > now.year + 50 else year


def status_failure(
    status: int, retry_after: str | None, now: datetime, latest: datetime | None = None
) -> Failure | None:
    """None for a usable response (2xx); a typed failure otherwise.

    A 304 here is a failure too: it answered a request without validators, so nothing stored
    is what it refers to (the executor takes the 304 to a revalidation itself).
    """
    if 200 <= status < 300:
        return None
    if status == 304:
        return Failure(
            code="UNEXPECTED_NOT_MODIFIED",
            disposition=_TERMINAL,
            safe_message="the origin answered 304 Not Modified to a request without validators",
        )
    retryable = status >= 500 or status in RETRYABLE_STATUSES
    return Failure(
        code=f"HTTP_{status}",
        disposition=_RETRYABLE if retryable else _TERMINAL,
        retry_at=parse_retry_after(retry_after, now, latest) if retryable else None,
        safe_message=f"the origin answered HTTP {status}",
    )


def local_failure(code: str, detail: str = "") -> tuple[AttemptOutcome, Failure]:
    """A failure found on this side of the wire, by its code in `LOCAL_FAILURES`."""
    outcome, disposition, message = LOCAL_FAILURES[code]
    safe_message = clip(f"{message}: {detail}" if detail else message)
    return outcome, Failure(code=code, disposition=disposition, safe_message=safe_message)
