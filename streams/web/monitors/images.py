"""A visual change's difference image over HTTP: read as the monitor's changes are (its owner, viewers
and above), downloaded as an artifact is (streamed, audited)."""

from __future__ import annotations

import itertools
from uuid import UUID

from fastapi import APIRouter, Request, Response

from projections.artifacts import content_key
from projections.lifecycle.state import Monitor
from projections.monitor_views import change_views
from schemas.enums import AuditAction, RetentionClass
from streams.web.artifacts import AUDIT_ID_HEADER, BYTES_RESPONSE, stored_bytes
from streams.web.auth import Caller
from streams.web.context import stored_of
from streams.web.errors import ApiError
from streams.web.monitors.routes import READ_ERRORS, read_monitor
from streams.web.ports import Reads

router = APIRouter(tags=["monitors"])


@router.get(
    "/monitors/{monitor_id}/changes/{check_job_id}/difference",
    response_class=Response,
    responses=BYTES_RESPONSE | READ_ERRORS,
    summary="A visual change's difference image (PNG): the later screenshot, its changed pixels in red",
)
async def difference_image(
    monitor_id: UUID, check_job_id: UUID, request: Request, principal: Caller
) -> Response:
    async def answer(reads: Reads, _: Monitor) -> Response:
        store = reads.store
        changes = itertools.chain(change_views(store.events_of(monitor_id)), store.older_changes(monitor_id))
        found = next((change.visual for change in changes if change.check_job_id == check_job_id), None)
        if found is None or found.difference is None:
            raise ApiError(
                404, "not_found", f"monitor {monitor_id} has no visual change from check {check_job_id}"
            )
        difference = found.difference
        target = f"artifact:{difference.artifact_id}"
        audit_id = await reads.audit(principal, request, AuditAction.ARTIFACT_DOWNLOAD, None, target)
        key = content_key(difference.sha256, RetentionClass.CACHE_7D)  # as check reads store it
        image = await stored_bytes(
            stored_of(request), principal, key, difference.content_type, difference.artifact_id
        )
        image.headers[AUDIT_ID_HEADER] = str(audit_id)
        return image

    return await read_monitor(request, monitor_id, principal, answer)
