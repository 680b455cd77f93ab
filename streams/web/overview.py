"""`GET /overview`: what the console's overview and `scrapestream top` show, in one answer."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
from fastapi import APIRouter, Request

from projections.access import READERS_OF_EVERYTHING
from streams.clock import utc_now
from streams.web import summary
from streams.web.auth import Caller
from streams.web.context import fleet_of
from streams.web.errors import responses
from streams.web.listings import recent_jobs
from streams.web.models import Cluster, Overview
from streams.web.peers import WORKER
from streams.web.ports import Fleet
from streams.web.processes import worker_processes

RECENT = timedelta(hours=1)
MOST_RECENT_JOBS = 2_000
PEER_METRICS_TIMEOUT_S = 2.0
router = APIRouter(tags=["operations"])


@router.get(
    "/overview",
    response_model=Overview,
    responses=responses(401, 503),
    summary="Jobs per state, the last hour's completions and latency, busiest hosts, lag and workers",
)
async def overview(request: Request, principal: Caller) -> Overview:
    now = utc_now()
    everything = principal.role in READERS_OF_EVERYTHING
    async with fleet_of(request).costly.slot(principal):
        recent = await recent_jobs(request, principal, now - RECENT, MOST_RECENT_JOBS)
        cluster = await _cluster(fleet_of(request)) if everything else None
    return Overview(
        at=now,
        states=dict(sorted(cluster.jobs.items())) if cluster is not None else summary.states_of(recent),
        states_of="every job" if everything else "your jobs accepted in the last hour",
        recent_jobs=len(recent),
        recent_limit=MOST_RECENT_JOBS,
        completed_last_minute=(
            summary.completed_since(recent, now - timedelta(minutes=1))
            if len(recent) < MOST_RECENT_JOBS
            else None
        ),
        outcomes=summary.outcome_mix(recent),
        latency_ms=summary.latency_percentiles(recent),
        completions=summary.completions_per_second(recent, now, RECENT),
        hosts=summary.busiest_hosts(recent),
        cluster=cluster,
    )


async def _cluster(fleet: Fleet) -> Cluster:
    metrics = summary.cluster_metrics(await _expositions(fleet))
    return Cluster(
        jobs=dict(sorted(metrics.jobs.items())),
        lag=dict(sorted(metrics.lag.items())),
        behind=metrics.behind(),
        workers=summary.partitions_by_worker(fleet.routing.owners, fleet.routing.everyone()),
        unowned=sorted(set(range(fleet.partitions)) - set(fleet.routing.owners)),
        unowned_elsewhere=fleet.consumer.unowned(),
        processes=await worker_processes(fleet),
    )


async def _expositions(fleet: Fleet) -> list[str]:
    """Every worker's metrics: this one's from memory, the others' over HTTP (unreachable: left out)."""
    texts = [fleet.metrics.exposition().decode()]
    now_s = int(utc_now().timestamp())
    key = fleet.peer_key
    headers = {} if key is None else key.headers("GET", "/metrics", WORKER, now_s)
    async with httpx.AsyncClient(timeout=PEER_METRICS_TIMEOUT_S, headers=headers) as client:
        answers = await asyncio.gather(
            *(client.get(f"{peer}/metrics") for peer in fleet.routing.everyone()[1:]),
            return_exceptions=True,
        )
    texts += [answer.text for answer in answers if isinstance(answer, httpx.Response) and answer.is_success]
    return texts
