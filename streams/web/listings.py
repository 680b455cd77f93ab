"""Listings over every worker: each answers for the partitions it keeps, the asked worker merges.

The public routes take an opaque cursor; the internal `/_shard/...` routes (not in the OpenAPI
document) take the position itself and answer with the partitions they covered.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from projections.access import audit_read_refusal, listing_caller, reads_own_only
from projections.jobstore import JobQuery
from projections.readindex import Page
from projections.views import AuditList, JobList, audit_view
from schemas.enums import JobStatus
from schemas.events import AuditRecorded
from streams.auth.principals import Principal
from streams.web.auth import Caller, PeerCaller
from streams.web.context import reads_of
from streams.web.cursor import decode_cursor, encode_cursor, filters_digest
from streams.web.errors import ApiError, responses
from streams.web.jobs import JSON
from streams.web.ports import Reads
from streams.web.shards import Shard, page_json, shard_json

MAX_LIMIT = 500
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Items per page")]
Cursor = Annotated[str | None, Query(description="`next_cursor` of the previous page")]
States = Annotated[list[JobStatus] | None, Query(description="Any of these states (repeatable)")]
Since = Annotated[datetime | None, Query(description="Only jobs accepted at or after this time")]
Until = Annotated[datetime | None, Query(description="Only jobs accepted at or before this time")]
Host = Annotated[
    str | None, Query(max_length=253, description="Only jobs whose URL is on this host (no port)")
]
UrlText = Annotated[str | None, Query(max_length=2048, description="Only jobs whose URL contains this text")]
JobType = Annotated[str | None, Query(alias="type", description="A job type, e.g. `http.fetch`")]
Checks = Annotated[
    bool | None,
    Query(description="false: no monitors' scheduled checks; true: only them; unset: every job"),
]
Target = Annotated[str | None, Query(description="What the record is about: `job:<id>` or `artifact:<id>`")]
Actor = Annotated[str | None, Query(description="A principal's name")]
After = Annotated[str | None, Query(pattern=r"^[0-9]{15}/[0-9a-f-]{36}$")]
IdPrefix = Annotated[
    str | None,
    Query(
        pattern=r"^[0-9a-f-]{1,36}$",
        description="Only jobs whose id starts with this (as `list` prints them)",
    ),
]
LIST_ERRORS = responses(400, 401, 403, 503)
AuditFilter = Callable[[AuditRecorded], bool]
router = APIRouter(tags=["listings"])


@router.get(
    "/jobs",
    response_model=JobList,
    responses=LIST_ERRORS,
    summary="Jobs, newest first (a service sees its own)",
)
async def jobs(
    request: Request,
    principal: Caller,
    caller: str | None = None,
    state: States = None,
    job_type: JobType = None,
    since: Since = None,
    until: Until = None,
    host: Host = None,
    url: UrlText = None,
    id_prefix: IdPrefix = None,
    checks: Checks = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Response:
    query = _job_query(principal, caller, state, job_type, since, dead_letters=False, id_prefix=id_prefix)
    query = replace(query, until=until, host=_host(host), url_contains=url or None, checks=checks)
    return await _list_jobs(request, principal, query, cursor, limit)


@router.get(
    "/dead-letters",
    response_model=JobList,
    responses=LIST_ERRORS,
    summary="Dead-lettered jobs, most recently dead first",
)
async def dead_letters(
    request: Request,
    principal: Caller,
    caller: str | None = None,
    checks: Checks = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Response:
    query = replace(_job_query(principal, caller, None, None, None, dead_letters=True), checks=checks)
    return await _list_jobs(request, principal, query, cursor, limit)


@router.get("/_shard/jobs", include_in_schema=False)
async def jobs_shard(
    request: Request,
    principal: PeerCaller,
    caller: str | None = None,
    state: States = None,
    job_type: JobType = None,
    since: Since = None,
    dead_letters: bool = False,
    until: Until = None,
    host: Host = None,
    url: UrlText = None,
    id_prefix: IdPrefix = None,
    checks: Checks = None,
    after: After = None,
    limit: Limit = 50,
) -> Response:
    reads = reads_of(request)
    query = _job_query(principal, caller, state, job_type, since, dead_letters, id_prefix)
    query = replace(query, until=until, host=_host(host), url_contains=url or None, checks=checks)
    owned = reads.ownership.owned
    return Response(
        shard_json(owned, _local_jobs(reads, principal, query, after, limit)(owned)), media_type=JSON
    )


@router.get(
    "/audit",
    response_model=AuditList,
    responses=LIST_ERRORS,
    summary="The audit trail, newest first (viewers, operators, admins)",
)
async def audit(
    request: Request,
    principal: Caller,
    target: Target = None,
    actor: Actor = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Response:
    reads = reads_of(request)
    matches = _audit_filter(principal, target, actor)
    digest = filters_digest("audit", target, actor)
    after = decode_cursor(cursor, digest)
    params = {"target": target, "actor": actor, "after": after, "limit": limit}
    local = _local_audit(reads, matches, after, limit)
    page = await reads.gather(principal, "/_shard/audit", params, local, limit)
    return Response(page_json(page, encode_cursor(page.resume_after, digest)), media_type=JSON)


@router.get("/_shard/audit", include_in_schema=False)
async def audit_shard(
    request: Request,
    principal: PeerCaller,
    target: str | None = None,
    actor: str | None = None,
    after: After = None,
    limit: Limit = 50,
) -> Response:
    reads = reads_of(request)
    matches = _audit_filter(principal, target, actor)
    owned = reads.ownership.owned
    return Response(shard_json(owned, _local_audit(reads, matches, after, limit)(owned)), media_type=JSON)


async def recent_jobs(
    request: Request, principal: Principal, since: datetime, most: int
) -> list[dict[str, Any]]:
    """Up to `most` of the jobs accepted since `since` that `principal` may list, newest first."""
    return await listed_jobs(request, principal, JobQuery(since=since), most)


async def listed_jobs(
    request: Request, principal: Principal, asked: JobQuery, most: int
) -> list[dict[str, Any]]:
    """Up to `most` jobs matching `asked` that `principal` may list, newest first, from every worker."""
    reads = reads_of(request)
    statuses = sorted(asked.statuses) if asked.statuses else None
    query = _job_query(principal, asked.caller, statuses, asked.job_type, asked.since, dead_letters=False)
    query = replace(
        query, until=asked.until, host=asked.host, url_contains=asked.url_contains, checks=asked.checks
    )
    params = _job_params(query)
    found: list[dict[str, Any]] = []
    after = None
    while len(found) < most:
        limit = min(MAX_LIMIT, most - len(found))
        local = _local_jobs(reads, principal, query, after, limit)
        page = await reads.gather(
            principal, "/_shard/jobs", params | {"after": after, "limit": limit}, local, limit
        )
        found += [json.loads(item) for _, item in page.items]
        after = page.resume_after
        if after is None:
            break
    return found


def _job_query(
    principal: Principal,
    caller: str | None,
    state: list[JobStatus] | None,
    job_type: str | None,
    since: datetime | None,
    dead_letters: bool,
    id_prefix: str | None = None,
) -> JobQuery:
    effective, refusal = listing_caller(principal.name, principal.role, caller)
    if refusal is not None:
        raise ApiError(403, "forbidden", refusal)
    statuses = frozenset(state) if state else None
    return JobQuery(effective, statuses, job_type, since, dead_letters, id_prefix)


async def _list_jobs(
    request: Request, principal: Principal, query: JobQuery, cursor: str | None, limit: int
) -> Response:
    reads = reads_of(request)
    params = _job_params(query)
    digest = filters_digest(*params.values())
    after = decode_cursor(cursor, digest)
    local = _local_jobs(reads, principal, query, after, limit)
    page = await reads.gather(
        principal, "/_shard/jobs", params | {"after": after, "limit": limit}, local, limit
    )
    return Response(page_json(page, encode_cursor(page.resume_after, digest)), media_type=JSON)


def _local_jobs(
    reads: Reads, principal: Principal, query: JobQuery, after: str | None, limit: int
) -> Callable[[list[int]], Shard]:
    own = reads_own_only(principal.role)

    def page(owned: list[int]) -> Shard:
        if query.id_prefix is not None:
            mine = set(owned)
            found = reads.store.jobs_with_id_prefix(
                lambda job_id: reads.partition_of(job_id) in mine, query, limit
            )
        else:
            found = reads.store.jobs_page(owned, query, after, limit)
        return Page([(at, reads.views.json(job, own)) for at, job in found.items], found.resume_after)

    return page


def _audit_filter(principal: Principal, target: str | None, actor: str | None) -> AuditFilter:
    refusal = audit_read_refusal(principal.role)
    if refusal is not None:
        raise ApiError(403, "forbidden", refusal)
    return lambda record: (
        (target is None or record.target == target) and (actor is None or record.actor_id == actor)
    )


def _local_audit(
    reads: Reads, matches: AuditFilter, after: str | None, limit: int
) -> Callable[[list[int]], Shard]:
    def page(owned: list[int]) -> Shard:
        found = reads.store.audit_page(owned, matches, after, limit)
        rendered = [(at, audit_view(record).model_dump_json().encode()) for at, record in found.items]
        return Page(rendered, found.resume_after)

    return page


def _job_params(query: JobQuery) -> dict[str, Any]:
    return {
        "caller": query.caller,
        "state": sorted(query.statuses) if query.statuses else None,
        "type": query.job_type,
        "since": None if query.since is None else query.since.isoformat(),
        "dead_letters": "true" if query.dead_letters else None,
        "id_prefix": query.id_prefix,
        "until": None if query.until is None else query.until.isoformat(),
        "host": query.host,
        "url": query.url_contains,
        "checks": None if query.checks is None else str(query.checks).lower(),
    }


def _host(host: str | None) -> str | None:
    return host.strip().lower().rstrip(".") or None if host else None
