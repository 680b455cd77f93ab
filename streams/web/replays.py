"""`POST /callbacks/replay`: the callbacks of the finished jobs a selection finds, delivered again.

Each job's replay is a `ReplayCallback` decided (and audited) by its lifecycle; they are sent at
most `per_receiver_per_s` a second to any one receiving host, whatever calls ask for them and however
the host is spelled (`ReceiverPacer`, one per worker), so a receiver back from an outage is not flooded.
"""

from __future__ import annotations

from urllib.parse import urlsplit
from uuid import UUID

from fastapi import APIRouter, Request

from projections.jobstore import JobQuery
from projections.lifecycle.mutations import REPLAYING_ROLES
from schemas.enums import AuditAction
from streams.auth.principals import Principal
from streams.runtime.publisher import outgoing
from streams.web.auth import Caller
from streams.web.context import commands_of
from streams.web.errors import ApiError, responses
from streams.web.jobs import replay_command
from streams.web.listings import listed_jobs
from streams.web.models import BulkReplayBody, BulkReplayResult

router = APIRouter(tags=["jobs"])


@router.post(
    "/callbacks/replay",
    response_model=BulkReplayResult,
    responses=responses(400, 401, 403, 503),
    summary="Deliver the callbacks of matching finished jobs again, original webhook-ids, paced per receiver",
)
async def replay_callbacks(body: BulkReplayBody, request: Request, principal: Caller) -> BulkReplayResult:
    commands = commands_of(request)
    commands.refusals.check(principal)
    if principal.role not in REPLAYING_ROLES:
        refusal = f"role {principal.role} may not replay callbacks; OPERATOR, ADMIN may"
        await commands.audit(principal, request, AuditAction.CALLBACK_REPLAY, refusal, "callbacks:replay")
        commands.refusals.refused(principal)
        raise ApiError(403, "forbidden", refusal)
    query = JobQuery(caller=body.caller, statuses=frozenset(body.states), since=body.since, until=body.until)
    async with commands.costly.slot(principal):
        jobs = await listed_jobs(request, principal, query, body.limit)
    override = None if body.callback_url is None else urlsplit(body.callback_url).hostname or ""
    receivers = {UUID(job["job_id"]): override or job["callback_host"] for job in jobs}
    busy = {UUID(job["job_id"]) for job in jobs if job["callbacks_pending"]}
    chosen = [job_id for job_id, host in receivers.items() if host is not None and job_id not in busy]
    skipped = [job_id for job_id, host in receivers.items() if host is None]
    if not body.dry_run:
        await _send_paced(request, body, principal, {job_id: str(receivers[job_id]) for job_id in chosen})
    said = {"replayed": chosen, "skipped": skipped, "still_delivering": sorted(busy)}
    return BulkReplayResult(matched=len(jobs), dry_run=body.dry_run, **said)


async def _send_paced(
    request: Request, body: BulkReplayBody, principal: Principal, hosts: dict[UUID, str]
) -> None:
    """Each replay on the commands topic, no receiving host sent more than its share a second."""
    commands = commands_of(request)
    interval = max(1.0 / body.per_receiver_per_s, commands.replay_interval_s())
    for job_id, host in hosts.items():
        await commands.replay_pacer.turn(host, interval)
        command = replay_command(job_id, body, principal, request)
        await commands.publisher.send_all([outgoing(commands.settings.topic("commands"), job_id, command)])
