"""`PUT /uploads/{job}/{lease}`: an outside executor's result too large for a record, to the URL
its due work was handed (`streams.artifacts.uploads`): signed for that job, lease and key, expiring,
written once (a URL takes one result, however often it is tried after), bounded by
`SCRAPESTREAM_REMOTE_RESULT_MAX_BYTES`."""

from __future__ import annotations

import contextlib
import os
from uuid import UUID, uuid4

from fastapi import APIRouter, Query, Request, Response

from streams.clock import utc_now
from streams.web.context import stored_of
from streams.web.errors import ApiError, responses

router = APIRouter(tags=["remote executors"])


@router.put(
    "/uploads/{job_id}/{lease_id}",
    status_code=201,
    responses=responses(400, 403, 404, 409, 413),
    summary="A remote executor's large result, to the signed URL its due work carries",
)
async def upload(
    job_id: UUID,
    lease_id: UUID,
    request: Request,
    key: str = Query(max_length=256),
    expires: str = Query(max_length=20),
    signature: str = Query(max_length=128),
) -> Response:
    uploads = stored_of(request).uploads
    if uploads is None:
        raise ApiError(404, "not_found", "this worker takes no uploads")
    refusal = uploads.refusal(job_id, lease_id, key, expires, signature, utc_now())
    if refusal is not None:
        raise ApiError(403, "forbidden", refusal)
    target = uploads.staged(job_id, lease_id, key)
    if not uploads.claimed(target, int(expires)):
        raise ApiError(409, "conflict", "this upload URL was used already: each takes one result")
    part = target.with_name(f"{target.name}.{uuid4().hex}.part")
    size = 0
    stored = False
    try:
        with part.open("wb") as written:
            async for chunk in request.stream():
                size += len(chunk)
                if size > uploads.max_bytes:
                    raise ApiError(413, "too_large", f"a result may be at most {uploads.max_bytes} bytes")
                written.write(chunk)
        os.replace(part, target)
        stored = True
    finally:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
        if not stored:
            uploads.unclaimed(target)
    return Response(status_code=201)
