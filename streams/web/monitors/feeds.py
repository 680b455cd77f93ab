"""Monitor changes as Atom feeds, behind the API's auth: one monitor's, or all of a caller's (merged
over every worker's partitions, newest first)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query, Request, Response

from projections.lifecycle.identity import MONITOR_NAMESPACE, name_based
from projections.lifecycle.state import Monitor
from projections.monitor_views import FeedEntry, feed_entries
from projections.readindex import Page, position
from streams.web.auth import Caller, PeerCaller
from streams.web.context import reads_of
from streams.web.errors import ApiError, responses
from streams.web.monitors.atom import MEDIA_TYPE, atom_feed
from streams.web.monitors.routes import READ_ERRORS, monitors_caller, read_monitor
from streams.web.ports import Reads
from streams.web.shards import Shard, shard_json

router = APIRouter(tags=["monitors"])
MONITORS_PAGE = 500
Entries = Annotated[int, Query(ge=1, le=200, description="At most this many changes, the newest")]
FEED: dict[int | str, dict[str, Any]] = {
    200: {"content": {MEDIA_TYPE: {}}, "description": "An Atom feed (RFC 4287)"}
}


@router.get(
    "/monitors/changes.atom",
    response_class=Response,
    responses=FEED | responses(400, 401, 403, 429, 503),
    summary="The changes of a caller's monitors as an Atom feed (a service's own; others name `caller`)",
)
async def caller_feed(
    request: Request, principal: Caller, caller: str | None = None, limit: Entries = 50
) -> Response:
    reads = reads_of(request)
    effective = monitors_caller(principal, caller)
    if effective is None:
        raise ApiError(400, "invalid_request", "name the caller whose monitors the feed follows: ?caller=")
    params = {"caller": effective, "limit": limit}
    page = await reads.gather(
        principal, "/_shard/monitor-feed", params, _local(reads, effective, limit), limit
    )
    entries = [FeedEntry.model_validate_json(item) for _, item in page.items]
    feed_id = name_based(MONITOR_NAMESPACE, f"feed:{effective}")
    path = f"/monitors/changes.atom?caller={effective}"
    body = atom_feed(feed_id, f"Changes of {effective}'s monitors", str(request.base_url), path, entries)
    return Response(body, media_type=MEDIA_TYPE)


@router.get("/_shard/monitor-feed", include_in_schema=False)
async def feed_shard(request: Request, principal: PeerCaller, caller: str, limit: Entries = 50) -> Response:
    reads = reads_of(request)
    effective = monitors_caller(principal, caller) or caller
    owned = reads.ownership.owned
    return Response(shard_json(owned, _local(reads, effective, limit)(owned)), media_type="application/json")


@router.get(
    "/monitors/{monitor_id}/changes.atom",
    response_class=Response,
    responses=FEED | READ_ERRORS,
    summary="A monitor's changes as an Atom feed, newest first",
)
async def monitor_feed(
    monitor_id: UUID, request: Request, principal: Caller, limit: Entries = 50
) -> Response:
    async def answer(reads: Reads, monitor: Monitor) -> Response:
        store = reads.store
        entries = await reads.costly.run(
            principal,
            lambda: feed_entries(
                monitor, store.events_of(monitor_id), store.older_changes(monitor_id), limit
            ),
        )
        title = f"Changes of monitor {monitor.created.name}"
        path = f"/monitors/{monitor_id}/changes.atom"
        return Response(
            atom_feed(monitor_id, title, str(request.base_url), path, entries), media_type=MEDIA_TYPE
        )

    return await read_monitor(request, monitor_id, principal, answer)


def _local(reads: Reads, caller: str, limit: int) -> Callable[[list[int]], Shard]:
    """The newest `limit` changes of `caller`'s monitors on the partitions given."""

    def page(owned: list[int]) -> Shard:
        entries: list[FeedEntry] = []
        after = None
        while True:
            found = reads.store.monitors_page(owned, caller, after, MONITORS_PAGE)
            for _, monitor in found.items:
                older = reads.store.older_changes(monitor.monitor_id)
                entries += feed_entries(monitor, reads.store.events_of(monitor.monitor_id), older, limit)
            if found.resume_after is None or not found.items:
                break
            after = found.resume_after
        ranked = sorted(
            (position(entry.change.detected_at, entry.change.check_job_id), entry) for entry in entries
        )
        return Page([(at, entry.model_dump_json().encode()) for at, entry in ranked[:limit]], None)

    return page
