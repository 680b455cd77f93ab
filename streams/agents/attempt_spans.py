"""What an attempt's span says, in OpenTelemetry's HTTP terms: the request without its query or
credentials, the status, the bytes, the route and whether the cache answered."""

from __future__ import annotations

from urllib.parse import urlsplit

from schemas.enums import AttemptOutcome
from schemas.records import Attempt
from schemas.work import DueWork

Attributes = dict[str, str | int | bool]


def attempt_attributes(work: DueWork) -> Attributes:
    attributes: Attributes = {
        "scrapestream.job.id": str(work.job_id),
        "scrapestream.job.type": work.job_type,
        "scrapestream.attempt.number": work.attempt_number,
        "http.request.method": work.request.method.value,
    }
    return attributes | address_attributes(work.request.url, with_path=True)


def address_attributes(url: str, with_path: bool) -> Attributes:
    """Where a request goes: scheme, host, port (and path), never the query, fragment or userinfo;
    nothing for a URL that does not parse (a span never fails what it describes)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return {}
    attributes: Attributes = {"url.scheme": parts.scheme, "server.address": host}
    if port is not None:
        attributes["server.port"] = port
    if with_path:
        attributes["url.full"] = (
            f"{parts.scheme}://{host}{'' if port is None else f':{port}'}{parts.path or '/'}"
        )
    return attributes


def outcome_attributes(attempt: Attempt) -> Attributes:
    attributes: Attributes = {
        "scrapestream.attempt.outcome": attempt.outcome.value,
        "scrapestream.route": attempt.route_name or attempt.route.value,
        "scrapestream.cache": cache_use(attempt),
        "http.response.body.size": attempt.bytes,
    }
    if attempt.http_status is not None:
        attributes["http.response.status_code"] = attempt.http_status
    if attempt.failure is not None:
        attributes["error.type"] = attempt.failure.code
    return attributes


def cache_use(attempt: Attempt) -> str:
    if attempt.from_cache:
        return "hit"
    return "revalidated" if attempt.outcome is AttemptOutcome.NOT_MODIFIED else "miss"
