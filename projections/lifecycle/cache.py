"""The response cache's rules: which attempts make an entry, for how long, and when one answers a job.

Entries are keyed by request identity (`JobAccepted.request_hash`), so every job of the same
request, on any partition, shares them. An entry answers a job only as a live answer could have:
never past the job's policy class's byte caps, never with artifacts kept for less time than the
job asks, and never without validation when the origin (`no-cache`) or the job's request asks for it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from projections.artifacts import RETENTION, kept_at_least_as_long
from projections.lifecycle.freshness import request_allows_reuse
from projections.lifecycle.outcomes import status_failure
from projections.lifecycle.state import Job
from schemas.enums import AttemptOutcome, CacheMode, CaptureMode, RetentionClass
from schemas.records import Attempt, Failure
from schemas.work import CacheEntry

KEPT_AT_MOST = timedelta(days=7)
NEGATIVE_FOR = timedelta(hours=1)
NEGATIVE_STATUSES = frozenset({401, 403, 404, 410})
REUSABLE = frozenset({AttemptOutcome.FETCHED, AttemptOutcome.NOT_MODIFIED})
STORED_STATUS = 200  # what a response revalidated by a 304 stands for


@dataclass(frozen=True)
class ResponseCaps:
    """A job's policy class's byte caps: a stored response answers only within them."""

    max_body_bytes: int
    max_decoded_bytes: int

    def hold(self, entry: CacheEntry) -> bool:
        sizes = [artifact.size_bytes for artifact in entry.artifacts]
        return entry.wire_bytes <= self.max_body_bytes and all(
            size <= self.max_decoded_bytes for size in sizes
        )


def cache_key(request_hash: str, capture_mode: CaptureMode) -> str:
    """Where a job's answer is cached: a metadata-only answer under a key of its own, so it never
    displaces, or stands in for, a stored page."""
    if capture_mode is not CaptureMode.METADATA_ONLY:
        return request_hash
    return hashlib.sha256(f"{request_hash}/metadata".encode()).hexdigest()


def cache_entry(job: Job, attempt: Attempt) -> CacheEntry | None:
    """The entry an attempt makes, if any: a stored 2xx, or a 401/403/404/410 without a body.

    A metadata-only answer (a 2xx, nothing stored) makes one under its own key (`cache_key`).
    A 304 to a revalidation renews the entry with the same artifacts. A stored response expires
    at the earliest of seven days, each artifact's expiry (its retention) and the origin's own
    freshness; a negative one after an hour. What the origin forbids a shared cache to store
    (`no-store`, `private`) makes none, and a cache hit none either.
    """
    status = attempt.http_status
    if attempt.from_cache or not attempt.storable or status is None:
        return None
    if job.accepted.credential is not None:  # an answer to a credential is that caller's alone
        return None
    stored_at = attempt.finished_at
    key = job.accepted.request_hash
    metadata_only = job.accepted.capture_mode is CaptureMode.METADATA_ONLY
    if (
        attempt.outcome in REUSABLE
        and (attempt.artifacts or metadata_only)
        and (200 <= status < 300 or status == 304)
    ):
        key = cache_key(key, job.accepted.capture_mode)
        limits = [stored_at + KEPT_AT_MOST]
        limits += [artifact.expires_at for artifact in attempt.artifacts if artifact.expires_at is not None]
        kept_for = RETENTION[job.accepted.retention_class]
        if not attempt.artifacts and kept_for is not None:  # metadata only: as long as its class keeps
            limits.append(stored_at + kept_for)
        if attempt.fresh_for_ms is not None:
            # Clamped first: an origin may claim freshness for millennia (`Expires: … 9999`).
            fresh_for_ms = min(max(attempt.fresh_for_ms, 0), KEPT_AT_MOST // timedelta(milliseconds=1))
            limits.append(stored_at + timedelta(milliseconds=fresh_for_ms))
        artifacts = attempt.artifacts
    elif attempt.outcome is AttemptOutcome.HTTP_ERROR and status in NEGATIVE_STATUSES:
        if attempt.must_revalidate:
            return None  # a bodiless answer cannot be validated, so it is never used
        limits, artifacts = [stored_at + NEGATIVE_FOR], ()
    else:
        return None
    expires_at = min(limits)
    if expires_at <= stored_at:
        return None
    return CacheEntry(
        request_hash=key,
        http_status=STORED_STATUS if status == 304 else status,
        artifacts=artifacts,
        etag=attempt.etag,
        last_modified=attempt.last_modified,
        stored_at=stored_at,
        expires_at=expires_at,
        job_id=job.job_id,
        must_revalidate=attempt.must_revalidate,
        wire_bytes=attempt.bytes,
    )


def answers(
    entry: CacheEntry | None,
    mode: CacheMode,
    retention_class: RetentionClass,
    now: datetime,
    caps: ResponseCaps,
    request_headers: Mapping[str, str],
) -> bool:
    """Whether a job in `mode` may be answered from `entry` without a request, once its artifacts
    are found still stored: never with artifacts kept for less time than the job asks, past the
    job's caps, or when the entry or the request asks for validation first."""
    return (
        _usable(entry, retention_class, now, caps)
        and entry is not None
        and mode is CacheMode.REUSE_VALID
        and not entry.must_revalidate
        and request_allows_reuse(request_headers)
    )


def cached_outcome(entry: CacheEntry, now: datetime) -> tuple[AttemptOutcome, Failure | None]:
    """A stored response (or a metadata-only answer) is a `CACHE_HIT`; a negative entry ends the job
    with the cached status."""
    if entry.artifacts or 200 <= entry.http_status < 300:
        return AttemptOutcome.CACHE_HIT, None
    return AttemptOutcome.HTTP_ERROR, status_failure(entry.http_status, None, now)


def revalidation_headers(
    entry: CacheEntry | None,
    mode: CacheMode,
    retention_class: RetentionClass,
    now: datetime,
    caps: ResponseCaps,
    request_headers: Mapping[str, str],
) -> dict[str, str]:
    """The validators a job sends for its stored response: a `REVALIDATE` job, and a `REUSE_VALID`
    one whose entry or request asks for validation. None without a usable stored page (the job then
    fetches the page whole)."""
    if entry is None or not entry.artifacts or not _usable(entry, retention_class, now, caps):
        return {}
    validating = mode is CacheMode.REVALIDATE or (
        mode is CacheMode.REUSE_VALID and (entry.must_revalidate or not request_allows_reuse(request_headers))
    )
    if not validating:
        return {}
    headers = {}
    if entry.etag:
        headers["If-None-Match"] = entry.etag
    if entry.last_modified:
        headers["If-Modified-Since"] = entry.last_modified
    return headers


def _usable(
    entry: CacheEntry | None, retention_class: RetentionClass, now: datetime, caps: ResponseCaps
) -> bool:
    return (
        entry is not None
        and now < entry.expires_at
        and caps.hold(entry)
        and all(kept_at_least_as_long(artifact.key, retention_class) for artifact in entry.artifacts)
    )
