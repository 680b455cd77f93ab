"""What an attempt's span says, in OpenTelemetry's HTTP terms: the request without its query or
credentials, the status, the bytes, the route and whether the cache answered."""

from __future__ import annotations

from urllib.parse import urlsplit

from schemas.enums import AttemptOutcome
from schemas.records import Attempt
from schemas.work import DueWork

Attributes = dict[str, str | int | bool]


def attempt_attributes(work: DueWork) -> Attributes:
    url = urlsplit(work.request.url)
    port = url.port
    host = url.hostname or ""
    where = f"{url.scheme}://{host}{'' if port is None else f':{port}'}{url.path or '/'}"
    attributes: Attributes = {
        "scrapestream.job.id": str(work.job_id),
        "scrapestream.job.type": work.job_type,
        "scrapestream.attempt.number": work.attempt_number,
        "http.request.method": work.request.method.value,
        "url.full": where,
        "url.scheme": url.scheme,
        "server.address": host,
    }
    if port is not None:
        attributes["server.port"] = port
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
