"""`GET /processes`: the processes of a worker. A process answers for itself; a worker of several answers
for all of them at its front (`streams/supervisor/front.py`), which is also where the overview asks."""

from __future__ import annotations

import os

import httpx
from fastapi import APIRouter, Request

from streams.clock import utc_now
from streams.runtime.resident import resident_bytes
from streams.web.auth import Credentials
from streams.web.context import fleet_of
from streams.web.errors import responses
from streams.web.models import Processes, ProcessView
from streams.web.operations import reader_of_everything
from streams.web.peers import WORKER
from streams.web.ports import Fleet

STARTED_AT = utc_now()
FRONT_TIMEOUT_S = 2.0
router = APIRouter(tags=["operations"])


@router.get(
    "/processes",
    response_model=Processes,
    responses=responses(401, 403),
    summary="The worker's processes: pid, state, address, restarts, last exit, resident memory",
)
async def processes(request: Request, credentials: Credentials) -> Processes:
    fleet = fleet_of(request)
    await reader_of_everything(request, credentials, "the worker's processes")
    return Processes(processes=[this_process(fleet)])


def this_process(fleet: Fleet) -> ProcessView:
    pid = os.getpid()
    return ProcessView(
        index=fleet.process_index,
        pid=pid,
        state="serving",
        url=fleet.routing.own_url,
        started_at=STARTED_AT,
        restarts=0,
        last_exit=None,
        resident_bytes=resident_bytes(pid),
    )


async def worker_processes(fleet: Fleet) -> list[ProcessView]:
    """Every process of this worker, from its front; this one alone if it has none or it does not answer."""
    if fleet.front is None:
        return [this_process(fleet)]
    key = fleet.peer_key
    headers = {} if key is None else key.headers("GET", "/processes", WORKER, int(utc_now().timestamp()))
    try:
        async with httpx.AsyncClient(timeout=FRONT_TIMEOUT_S, headers=headers) as client:
            answer = await client.get(f"{fleet.front}/processes")
        return Processes.model_validate_json(answer.content).processes
    except (httpx.HTTPError, ValueError):
        return [this_process(fleet)]
