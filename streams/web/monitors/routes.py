"""Monitors over HTTP: create, read (as of a time too), list its checks and changes, edit, pause,
resume, delete. Each is answered by the worker that keeps the monitor; changes go through Kafka
and are decided by the monitor's lifecycle, which this worker runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID, uuid4

from fastapi import APIRouter, Body, Query, Request, Response
from pydantic import ValidationError

from projections.access import job_read_refusal, listing_caller
from projections.jobstore import JobStore
from projections.lifecycle.checkpoint import monitor_of
from projections.lifecycle.history import checkpoint_refusal, events_until, state_as_of
from projections.lifecycle.identity import monitor_target, public_command_id
from projections.lifecycle.monitors import (
    change_refusal,
    creation_refusal,
    monitor_id_for,
    name_problem,
    spec_problem,
)
from projections.lifecycle.state import Monitor
from projections.monitor_views import (
    ChangeList,
    ChangeView,
    CheckList,
    CheckView,
    MonitorList,
    MonitorView,
    change_views,
    check_views,
    monitor_view,
    newest_views,
)
from projections.readindex import Page
from schemas.commands import (
    CreateMonitor,
    DeleteMonitor,
    EditMonitor,
    MonitorCommand,
    PauseMonitor,
    RecordAudit,
    ResumeMonitor,
)
from schemas.enums import AuditAction
from schemas.events import Event, MonitorRefused
from streams.auth.principals import Principal
from streams.clock import utc_now
from streams.moments import as_utc
from streams.runtime.publisher import outgoing
from streams.web.auth import Caller, PeerCaller
from streams.web.context import commands_of, reads_of, request_id
from streams.web.cursor import decode_cursor, encode_cursor, filters_digest
from streams.web.errors import ApiError, problems_of, responses
from streams.web.jobs import (
    MUTATION_RESPONSES,
    REFUSALS,
    actor_of,
    kept_history,
    mutate_through_lifecycle,
    replay_command,
)
from streams.web.listings import After, Cursor, Limit
from streams.web.models import MutationResult, ReplayBody
from streams.web.monitors.bodies import MonitorBody, SwitchBody, edited
from streams.web.ports import Audits, Commands, Reads
from streams.web.shards import Shard, page_json, shard_json

JSON = "application/json"
DECISION_TIMEOUT_S = 10.0
REFUSED = {
    "name_taken": (409, "conflict"),
    "deleted": (409, "conflict"),
    "invalid_spec": (400, "invalid_request"),
}
AUDITED_REFUSALS = {status: kind for kind, (status, _) in REFUSALS.items()}
READ_ERRORS = responses(400, 401, 404, 422, 429, 503)
CHANGE_ERRORS = responses(400, 401, 403, 404, 409, 429, 503)
AsOf = Annotated[
    datetime | None, Query(description="The monitor as it was then (RFC 3339, UTC unless it says)")
]
Until = Annotated[datetime | None, Query(description="Only what had happened by then (RFC 3339)")]
Newest = Annotated[int, Query(ge=1, le=1_000, description="At most this many, the newest")]
QUOTA_PAGE = 200
router = APIRouter(tags=["monitors"])


@router.post(
    "/monitors",
    response_model=MonitorView,
    status_code=201,
    responses={
        200: {"model": MonitorView, "description": "The same monitor exists already"},
        **CHANGE_ERRORS,
    },
    summary="Watch a page: checks on a schedule, and a change feed of what changed",
)
async def create_monitor(body: MonitorBody, request: Request, principal: Caller) -> Response:
    commands = commands_of(request)
    verified = commands.principals is not None
    command = CreateMonitor(
        command_id=public_command_id(principal.name, uuid4()),
        caller_identity=body.caller_identity or principal.name,
        name=body.name,
        spec=body.spec(),
        submitted_by=principal.name if verified else None,
        submitter_role=principal.role if verified else None,
        request_id=request_id(request),
    )
    target = monitor_id_for(command.caller_identity, command.name)
    async with _audited(commands, principal, request, AuditAction.MONITOR_CREATE, target):
        return await _create(reads_of(request), commands, request, principal, command)


async def _create(
    reads: Reads, commands: Commands, request: Request, principal: Principal, command: CreateMonitor
) -> Response:
    problem = name_problem(command.caller_identity, command.name) or spec_problem(command.spec)
    if problem is not None:
        raise ApiError(400, "invalid_request", problem)
    refusal = creation_refusal(command)
    if refusal is not None:
        raise ApiError(403, "forbidden", refusal)
    monitor_id = monitor_id_for(command.caller_identity, command.name)
    forwarded = await reads.forwarded(request, monitor_id)
    if forwarded is not None:
        return forwarded
    existing = reads.store.load(monitor_id)
    if isinstance(existing, Monitor) and not existing.deleted:
        if existing.spec != command.spec:
            raise ApiError(
                409, "conflict", f"{command.caller_identity} has a monitor named {command.name!r}: edit it"
            )
        return _view(existing, status=200)
    over = await quota_refusal(reads, principal, command.caller_identity)
    if over is not None:
        raise ApiError(409, "quota", over)
    await _decided(commands, monitor_id, command)
    return _view(_monitor(reads, monitor_id), status=201)


@router.get(
    "/monitors",
    response_model=MonitorList,
    responses=responses(400, 401, 403, 503),
    summary="Monitors, newest first (a service sees its own)",
)
async def list_monitors(
    request: Request, principal: Caller, caller: str | None = None, limit: Limit = 50, cursor: Cursor = None
) -> Response:
    reads = reads_of(request)
    effective = monitors_caller(principal, caller)
    digest = filters_digest("monitors", effective)
    after = decode_cursor(cursor, digest)
    params = {"caller": effective, "after": after, "limit": limit}
    page = await reads.gather(
        principal, "/_shard/monitors", params, _local(reads, effective, after, limit), limit
    )
    return Response(page_json(page, encode_cursor(page.resume_after, digest)), media_type=JSON)


@router.get("/_shard/monitors", include_in_schema=False)
async def monitors_shard(
    request: Request, principal: PeerCaller, caller: str | None = None, after: After = None, limit: Limit = 50
) -> Response:
    reads = reads_of(request)
    effective = monitors_caller(principal, caller)
    owned = reads.ownership.owned
    return Response(shard_json(owned, _local(reads, effective, after, limit)(owned)), media_type=JSON)


async def quota_refusal(reads: Reads, principal: Principal, caller: str) -> str | None:
    """Why `caller` may not hold one more monitor (it holds the most a caller may), or None."""
    most = reads.settings.max_monitors_per_caller
    if await _held(reads, principal, caller, most) < most:
        return None
    return (
        f"{caller} holds {most} monitors, the most a caller may "
        "(SCRAPESTREAM_MAX_MONITORS_PER_CALLER): delete one first"
    )


async def _held(reads: Reads, principal: Principal, caller: str, most: int) -> int:
    """How many monitors `caller` holds, counted over every worker's partitions up to `most`."""
    held, after = 0, None
    while True:
        params = {"caller": caller, "after": after, "limit": QUOTA_PAGE}
        local = _local(reads, caller, after, QUOTA_PAGE)
        page = await reads.gather(principal, "/_shard/monitors", params, local, QUOTA_PAGE)
        held += sum(1 for _, item in page.items if json.loads(item)["state"] != "deleted")
        if held >= most or page.resume_after is None:
            return held
        after = page.resume_after


def monitors_caller(principal: Principal, caller: str | None) -> str | None:
    effective, refusal = listing_caller(principal.name, principal.role, caller)
    if refusal is not None:
        raise ApiError(403, "forbidden", refusal.replace("jobs", "monitors"))
    return effective


def _local(reads: Reads, caller: str | None, after: str | None, limit: int) -> Callable[[list[int]], Shard]:
    def page(owned: list[int]) -> Shard:
        found = reads.store.monitors_page(owned, caller, after, limit)
        rendered = [(at, monitor_view(monitor).model_dump_json().encode()) for at, monitor in found.items]
        return Page(rendered, found.resume_after)

    return page


@router.get("/monitors/{monitor_id}", response_model=MonitorView, responses=READ_ERRORS, summary="A monitor")
async def get_monitor(monitor_id: UUID, request: Request, principal: Caller, as_of: AsOf = None) -> Response:
    async def answer(reads: Reads, monitor: Monitor) -> Response:
        if as_of is None:
            return _view(monitor)
        at = as_utc(as_of)
        checkpoint = reads.store.checkpoint(monitor_id)
        if checkpoint is None:
            history = kept_history(reads, monitor_id, at, "monitor")
            then = await reads.costly.run(principal, lambda: state_as_of(history, at))
        else:
            refusal = checkpoint_refusal(checkpoint.folded_at, at, utc_now())
            if refusal is not None:
                raise ApiError(422, "out_of_history", refusal)
            kept, base = reads.store.events_of(monitor_id), monitor_of(checkpoint)
            then = await reads.costly.run(principal, lambda: state_as_of(kept, at, base))
        if not isinstance(then, Monitor):
            raise ApiError(422, "out_of_history", f"monitor {monitor_id} did not exist at {at.isoformat()}")
        return _view(then)

    return await read_monitor(request, monitor_id, principal, answer)


@router.get(
    "/monitors/{monitor_id}/checks",
    response_model=CheckList,
    responses=READ_ERRORS,
    summary="A monitor's checks, newest first: when each was due, its job, and what it found",
)
async def get_checks(
    monitor_id: UUID, request: Request, principal: Caller, until: Until = None, limit: Newest = 100
) -> Response:
    return await _listed(
        request,
        monitor_id,
        principal,
        until,
        lambda store, events: CheckList(
            monitor_id=monitor_id,
            items=newest_views(
                check_views(events), store.older_checks(monitor_id), _recorded_at, until, limit
            ),
        ),
    )


@router.get(
    "/monitors/{monitor_id}/changes",
    response_model=ChangeList,
    responses=READ_ERRORS,
    summary="The changes a monitor found, newest first, each with its bounded diff",
)
async def get_changes(
    monitor_id: UUID, request: Request, principal: Caller, until: Until = None, limit: Newest = 100
) -> Response:
    return await _listed(
        request,
        monitor_id,
        principal,
        until,
        lambda store, events: ChangeList(
            monitor_id=monitor_id,
            items=newest_views(
                change_views(events), store.older_changes(monitor_id), _detected_at, until, limit
            ),
        ),
    )


@router.patch(
    "/monitors/{monitor_id}",
    response_model=MonitorView,
    responses=CHANGE_ERRORS,
    summary="Replace some of a monitor's options; they take effect at its next due time",
)
async def edit_monitor(
    monitor_id: UUID, request: Request, principal: Caller, changes: Annotated[dict[str, Any], Body()]
) -> Response:
    commands = commands_of(request)
    async with _audited(commands, principal, request, AuditAction.MONITOR_EDIT, monitor_id):
        return await _edit(reads_of(request), commands, request, monitor_id, principal, changes)


async def _edit(
    reads: Reads,
    commands: Commands,
    request: Request,
    monitor_id: UUID,
    principal: Principal,
    changes: dict[str, Any],
) -> Response:
    forwarded = await reads.forwarded(request, monitor_id)
    if forwarded is not None:
        return forwarded
    monitor = _changeable(reads, monitor_id, principal)
    try:
        spec = edited(monitor.spec, changes)
    except ValidationError as exc:
        raise ApiError(400, "invalid_request", problems_of(exc.errors())) from exc
    problem = spec_problem(spec)
    if problem is not None:
        raise ApiError(400, "invalid_request", problem)
    if spec == monitor.spec:
        return _view(monitor)
    await _decided(
        commands, monitor_id, EditMonitor(monitor_id=monitor_id, spec=spec, **actor_of(principal, request))
    )
    return _view(_monitor(reads, monitor_id))


@router.post(
    "/monitors/{monitor_id}/pause",
    response_model=MonitorView,
    responses=CHANGE_ERRORS,
    summary="No checks until resumed",
)
async def pause_monitor(monitor_id: UUID, body: SwitchBody, request: Request, principal: Caller) -> Response:
    action = AuditAction.MONITOR_PAUSE
    async with _audited(commands_of(request), principal, request, action, monitor_id, body.reason):
        return await _switch(request, monitor_id, principal, lambda m: m.paused, PauseMonitor, body.reason)


@router.post(
    "/monitors/{monitor_id}/resume",
    response_model=MonitorView,
    responses=CHANGE_ERRORS,
    summary="Checks again from the next due time",
)
async def resume_monitor(monitor_id: UUID, body: SwitchBody, request: Request, principal: Caller) -> Response:
    action = AuditAction.MONITOR_RESUME
    async with _audited(commands_of(request), principal, request, action, monitor_id, body.reason):
        return await _switch(
            request, monitor_id, principal, lambda m: not m.paused, ResumeMonitor, body.reason
        )


@router.post(
    "/monitors/{monitor_id}/replay-callback",
    response_model=MutationResult,
    responses=MUTATION_RESPONSES,
    summary="Deliver the latest change's callback again, with its original webhook-id (operators, admins)",
)
async def replay_change_callback(
    monitor_id: UUID, body: ReplayBody, request: Request, principal: Caller
) -> Response:
    return await mutate_through_lifecycle(request, replay_command(monitor_id, body, principal, request))


@router.delete(
    "/monitors/{monitor_id}",
    response_model=MonitorView,
    responses=CHANGE_ERRORS,
    summary="Stop watching; the history stays",
)
async def delete_monitor(monitor_id: UUID, request: Request, principal: Caller) -> Response:
    async with _audited(commands_of(request), principal, request, AuditAction.MONITOR_DELETE, monitor_id):
        return await _switch(request, monitor_id, principal, lambda m: False, DeleteMonitor, "")


async def _switch(
    request: Request,
    monitor_id: UUID,
    principal: Principal,
    already: Callable[[Monitor], bool],
    command: type[PauseMonitor | ResumeMonitor | DeleteMonitor],
    reason: str,
) -> Response:
    reads = reads_of(request)
    forwarded = await reads.forwarded(request, monitor_id)
    if forwarded is not None:
        return forwarded
    monitor = _changeable(reads, monitor_id, principal)
    if already(monitor):
        return _view(monitor)
    switched = command(monitor_id=monitor_id, reason=reason, **actor_of(principal, request))
    await _decided(commands_of(request), monitor_id, switched)
    return _view(_monitor(reads, monitor_id))


async def _listed(
    request: Request,
    monitor_id: UUID,
    principal: Principal,
    until: datetime | None,
    listing: Callable[[JobStore, list[Event]], Any],
) -> Response:
    async def answer(reads: Reads, _: Monitor) -> Response:
        def listed() -> bytes:
            events = reads.store.events_of(monitor_id)
            if until is not None:
                events = events_until(events, as_utc(until))
            return bytes(listing(reads.store, events).model_dump_json().encode())

        return Response(await reads.costly.run(principal, listed), media_type=JSON)

    return await read_monitor(request, monitor_id, principal, answer)


async def read_monitor(
    request: Request,
    monitor_id: UUID,
    principal: Principal,
    answer: Callable[[Reads, Monitor], Awaitable[Response]],
) -> Response:
    """A read of one monitor: the owner's answer when another worker keeps it, else `answer` once the
    caller may read the monitor."""
    reads = reads_of(request)
    forwarded = await reads.forwarded(request, monitor_id)
    if forwarded is not None:
        return forwarded
    return await answer(reads, readable_monitor(reads, monitor_id, principal))


async def _decided(commands: Commands, monitor_id: UUID, command: MonitorCommand) -> None:
    """Publishes `command` for the monitor's lifecycle (this worker's) and waits for what it decided."""
    command_id = command.command_id or uuid4()
    waiting = asyncio.ensure_future(commands.decisions.decision(command_id, DECISION_TIMEOUT_S))
    try:
        await commands.publisher.send_all(
            [outgoing(commands.settings.topic("commands"), monitor_id, command)]
        )
    except BaseException:
        waiting.cancel()
        raise
    decided = await waiting
    if decided is None:
        raise ApiError(
            503,
            "unavailable",
            f"monitor {monitor_id}: not decided within {DECISION_TIMEOUT_S:.0f} s; it still will be",
        )
    if isinstance(decided, MonitorRefused):
        status, code = REFUSED.get(decided.reason, (409, "conflict"))
        raise ApiError(status, code, decided.detail)
    if isinstance(decided, RecordAudit):
        status, code = REFUSALS.get(decided.refusal, (409, "conflict"))
        raise AuditedRefusalError(status, code, decided.detail)


def readable_monitor(reads: Reads, monitor_id: UUID, principal: Principal) -> Monitor:
    """The monitor, when the caller may read it; another service's is answered as none at all."""
    reads.refusals.check(principal)
    state = reads.store.load(monitor_id)
    monitor = state if isinstance(state, Monitor) else None
    if monitor is None or job_read_refusal(principal.name, principal.role, monitor.owner) is not None:
        reads.refusals.refused(principal)
        raise ApiError(404, "not_found", f"no monitor {monitor_id}")
    return monitor


def _changeable(reads: Reads, monitor_id: UUID, principal: Principal) -> Monitor:
    monitor = readable_monitor(reads, monitor_id, principal)
    refusal = change_refusal(monitor, principal.name, principal.role)
    if refusal is not None:
        reads.refusals.refused(principal)
        raise ApiError(403, "forbidden", refusal)
    if monitor.deleted:
        raise ApiError(409, "conflict", f"monitor {monitor_id} is deleted")
    return monitor


def _monitor(reads: Reads, monitor_id: UUID) -> Monitor:
    state = reads.store.load(monitor_id)
    if not isinstance(state, Monitor):
        raise ApiError(503, "unavailable", f"monitor {monitor_id} is not in this worker's store yet")
    return state


class AuditedRefusalError(ApiError):
    """A refusal the lifecycle decided, and audited, itself."""


@contextlib.asynccontextmanager
async def _audited(
    audits: Audits,
    principal: Principal,
    request: Request,
    action: AuditAction,
    monitor_id: UUID,
    reason: str = "",
) -> AsyncIterator[None]:
    """A refused change of a monitor is audited in its actor's stream, as the lifecycle's are."""
    try:
        yield
    except AuditedRefusalError:
        raise
    except ApiError as refused:
        kind = AUDITED_REFUSALS.get(refused.status)
        if kind is not None:
            target = monitor_target(monitor_id)
            audits.audit_soon(principal, request, action, refused.message, target, reason, kind)
        raise


def _view(monitor: Monitor, status: int = 200) -> Response:
    return Response(monitor_view(monitor).model_dump_json(), status_code=status, media_type=JSON)


def _recorded_at(view: CheckView) -> datetime | None:
    return view.recorded_at


def _detected_at(view: ChangeView) -> datetime:
    return view.detected_at
