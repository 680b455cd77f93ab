"""`GET /cache`: whether a request would be (or, as of a time, would have been) answered from the
shared response cache, and by which entry.

The cache topic is compacted: each request keeps only its latest entry, so a time before that entry
was stored is past what is kept (422).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request

from projections.access import READERS_OF_EVERYTHING
from projections.lifecycle.cache import answers, cache_key
from projections.lifecycle.identity import CanonicalRequest, canonicalize
from schemas.enums import CacheMode, CaptureMode, PolicyClass, RetentionClass
from schemas.records import Request as JobRequest
from schemas.work import CacheEntry
from streams.clock import utc_now
from streams.fetch.http import caps_of
from streams.moments import as_utc
from streams.web.auth import Caller
from streams.web.context import fleet_of
from streams.web.errors import ApiError, responses
from streams.web.models import CacheAnswer, CacheEntryView

router = APIRouter(tags=["jobs"])


@router.get(
    "/cache",
    response_model=CacheAnswer,
    responses=responses(400, 401, 403, 422, 503),
    summary="Whether a GET of a URL is (or was at `as_of`) answered from the cache, and by which entry",
)
async def cache_answer(
    request: Request,
    principal: Caller,
    url: Annotated[str, Query(max_length=8192, description="The page, as a submission names it")],
    as_of: Annotated[datetime | None, Query(description="Then instead of now (RFC 3339)")] = None,
    capture_mode: CaptureMode = CaptureMode.RAW_BODY,
    policy_class: PolicyClass = PolicyClass.STANDARD,
    retention_class: RetentionClass = RetentionClass.CACHE_7D,
) -> CacheAnswer:
    if principal.role not in READERS_OF_EVERYTHING:
        raise ApiError(403, "forbidden", "the shared cache is for viewers, operators and admins to inspect")
    fleet = fleet_of(request)
    if fleet.table is None:
        raise ApiError(503, "unavailable", "this worker keeps no cache table")
    canonical = canonicalize(JobRequest(url=url))
    if not isinstance(canonical, CanonicalRequest):
        raise ApiError(400, "invalid_request", canonical.detail)
    now = utc_now()
    at = now if as_of is None else as_utc(as_of)
    if at > now:
        raise ApiError(422, "out_of_history", f"{at.isoformat()} is in the future (now is {now.isoformat()})")
    key = cache_key(canonical.request_hash, capture_mode)
    entry = fleet.table.get(key) or (None if key == canonical.request_hash else fleet.table.get(key))
    if as_of is not None and (entry is None or entry.stored_at > at):
        kept = (
            "none is kept" if entry is None else f"the one kept was stored at {entry.stored_at.isoformat()}"
        )
        raise ApiError(
            422,
            "out_of_history",
            f"the cache keeps only the latest entry of each request ({kept}); {at.isoformat()} is before it",
        )
    caps = caps_of(fleet.settings.policy_classes[policy_class])
    answered = answers(entry, CacheMode.REUSE_VALID, retention_class, at, caps, {})
    return CacheAnswer(
        url=url,
        request_hash=canonical.request_hash,
        at=at,
        answered_from_cache=answered,
        why=_why(entry, answered, at),
        entry=None if entry is None else CacheEntryView.model_validate(entry, from_attributes=True),
    )


def _why(entry: CacheEntry | None, answered: bool, at: datetime) -> str:
    if entry is None:
        return "no entry is kept for this request: it would be fetched"
    if answered:
        return "the entry was fresh then for a REUSE_VALID job: no request would reach the origin"
    return (
        f"the entry would not answer at {at.isoformat()} (expired, too large for the policy class, kept "
        "too briefly for the retention class, or it asks for validation first): it would be fetched"
    )
