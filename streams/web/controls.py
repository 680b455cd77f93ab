"""Switching a job type off and on at run time: operators and admins, audited, on the controls topic.

A switched-off type's new submissions are rejected `JOB_TYPE_DISABLED` by the lifecycle and its
queued work is not started (each lease lapses uncharged and the work is dispatched again), until
it is switched on. Every worker reads the controls topic whole (`streams.readers.global_table`).
"""

from __future__ import annotations

import msgspec
from fastapi import APIRouter, Request, Response

from projections.access import control_refusal
from schemas.enums import AuditAction
from schemas.work import JobTypeControl
from streams.auth.principals import Principal
from streams.clock import utc_now
from streams.runtime.publisher import outgoing
from streams.web.auth import Caller
from streams.web.context import commands_of
from streams.web.errors import ApiError, responses
from streams.web.jobs import JSON
from streams.web.models import MutationBody

router = APIRouter(tags=["operations"])


@router.post(
    "/job-types/{name}/disable",
    status_code=202,
    responses=responses(400, 401, 403, 404),
    summary="Switch a job type off: its submissions are rejected, its queued work waits (audited)",
)
async def disable(name: str, body: MutationBody, request: Request, principal: Caller) -> Response:
    return await _switch(request, principal, name, enabled=False, reason=body.reason)


@router.post(
    "/job-types/{name}/enable",
    status_code=202,
    responses=responses(400, 401, 403, 404),
    summary="Switch a job type on again (audited)",
)
async def enable(name: str, body: MutationBody, request: Request, principal: Caller) -> Response:
    return await _switch(request, principal, name, enabled=True, reason=body.reason)


async def _switch(request: Request, principal: Principal, name: str, enabled: bool, reason: str) -> Response:
    commands = commands_of(request)
    commands.refusals.check(principal)
    target = f"job-type:{name[:64]}"
    refusal = control_refusal(principal.role)
    if refusal is not None:
        await commands.audit(principal, request, AuditAction.JOB_TYPE_CONTROL, refusal, target, reason=reason)
        commands.refusals.refused(principal)
        raise ApiError(403, "forbidden", refusal)
    if commands.policy.profile(name) is None:
        raise ApiError(404, "not_found", f"no job type {name!r} in this deployment")
    control = JobTypeControl(
        job_type=name,
        enabled=enabled,
        reason=reason,
        actor_id=principal.name,
        actor_role=principal.role,
        changed_at=utc_now(),
    )
    await commands.publisher.send_all([outgoing(commands.settings.topic("controls"), name, control)])
    detail = "switched on" if enabled else "switched off"
    await commands.audit(
        principal, request, AuditAction.JOB_TYPE_CONTROL, None, target, reason=reason, detail=detail
    )
    return Response(msgspec.json.encode(control), status_code=202, media_type=JSON)
