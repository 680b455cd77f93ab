"""The response cache's rules: which attempts make an entry, for how long, and when one answers a job.

Entries are keyed by request identity (`JobAccepted.request_hash`), so every job of the same
request, on any partition, shares them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from projections.artifacts import kept_at_least_as_long
from projections.lifecycle.outcomes import status_failure
from projections.lifecycle.state import Job
from schemas.enums import AttemptOutcome, CacheMode, RetentionClass
from schemas.records import Attempt, Failure
from schemas.types import build
from schemas.work import CacheEntry

KEPT_AT_MOST = timedelta(days=7)
NEGATIVE_FOR = timedelta(hours=1)
NEGATIVE_STATUSES = frozenset({401, 403, 404, 410})
REUSABLE = frozenset({AttemptOutcome.FETCHED, AttemptOutcome.NOT_MODIFIED})
STORED_STATUS = 200  # what a response revalidated by a 304 stands for


def cache_entry(job: Job, attempt: Attempt) -> CacheEntry | None:
    """The entry an attempt makes, if any: a stored 2xx, or a 401/403/404/410 without a body.

    A 304 to a revalidation renews the entry with the same artifacts. A stored response expires
    at the earliest of seven days, each artifact's expiry (its retention) and the origin's own
    freshness; a negative one after an hour. What the origin forbids a shared cache to store
    (`no-store`, `private`) makes none, and a cache hit none either.
    """
    status = attempt.http_status
    if attempt.from_cache or not attempt.storable or status is None:
        return None
    stored_at = attempt.finished_at
    if attempt.outcome in REUSABLE and attempt.artifacts and (200 <= status < 300 or status == 304):
        limits = [stored_at + KEPT_AT_MOST]
        limits += [artifact.expires_at for artifact in attempt.artifacts if artifact.expires_at is not None]
        if attempt.fresh_for_ms is not None:
            # Clamped first: an origin may claim freshness for millennia (`Expires: … 9999`).
            fresh_for_ms = min(max(attempt.fresh_for_ms, 0), KEPT_AT_MOST // timedelta(milliseconds=1))
            limits.append(stored_at + timedelta(milliseconds=fresh_for_ms))
        artifacts = attempt.artifacts
    elif attempt.outcome is AttemptOutcome.HTTP_ERROR and status in NEGATIVE_STATUSES:
        limits, artifacts = [stored_at + NEGATIVE_FOR], ()
    else:
        return None
    expires_at = min(limits)
    if expires_at <= stored_at:
        return None
    fields = {
        "request_hash": job.accepted.request_hash,
        "http_status": STORED_STATUS if status == 304 else status,
        "artifacts": artifacts,
        "etag": attempt.etag,
        "last_modified": attempt.last_modified,
        "stored_at": stored_at,
        "expires_at": expires_at,
        "job_id": job.job_id,
    }
    return build(CacheEntry, fields)


def answers(
    entry: CacheEntry | None, mode: CacheMode, retention_class: RetentionClass, now: datetime
) -> bool:
    """Whether a job in `mode` may be answered from `entry` without a request, once its artifacts
    are found still stored: never with artifacts kept for less time than the job asks."""
    return (
        entry is not None
        and mode is CacheMode.REUSE_VALID
        and now < entry.expires_at
        and _kept_for(entry, retention_class)
    )


def cached_outcome(entry: CacheEntry, now: datetime) -> tuple[AttemptOutcome, Failure | None]:
    """A stored response is a `CACHE_HIT`; a negative entry ends the job with the cached status."""
    if entry.artifacts:
        return AttemptOutcome.CACHE_HIT, None
    return AttemptOutcome.HTTP_ERROR, status_failure(entry.http_status, None, now)


def revalidation_headers(
    entry: CacheEntry | None, mode: CacheMode, retention_class: RetentionClass
) -> dict[str, str]:
    """The validators a `REVALIDATE` job sends for its stored response; none without one, or when
    the stored artifacts are kept for less time than the job asks (it fetches the page whole)."""
    if (
        entry is None
        or mode is not CacheMode.REVALIDATE
        or not entry.artifacts
        or not _kept_for(entry, retention_class)
    ):
        return {}
    headers = {}
    if entry.etag:
        headers["If-None-Match"] = entry.etag
    if entry.last_modified:
        headers["If-Modified-Since"] = entry.last_modified
    return headers


def _kept_for(entry: CacheEntry, retention_class: RetentionClass) -> bool:
    return all(kept_at_least_as_long(artifact.key, retention_class) for artifact in entry.artifacts)
