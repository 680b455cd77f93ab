"""Leases of running work: a revoked lease (a cancelled job's) stops the work, which then reports nothing."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import httpx
import pytest

from schemas.codec import decode
from schemas.enums import CacheMode
from schemas.events import AttemptStarted, StaleReportIgnored
from schemas.work import LeaseRevoked
from tests.e2e.conftest import System, read_topic, running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")
RUNTIME_MS = 8_000


def kinds_of(system: System, job_id: UUID, kind: type[Any]) -> list[Any]:
    return [event for event in system.events.of_job(job_id) if isinstance(event, kind)]


async def test_cancelling_a_running_job_stops_its_fetch_at_once_and_nothing_is_reported(
    broker, origin, tmp_path
):
    # Lease: 8 s of runtime and 1 s of grace, renewed every 5 s (a third of it, at least 5 s).
    settings = worker_settings(
        broker.bootstrap, tmp_path, profiles={"http.fetch": (RUNTIME_MS, 3)}, lease_grace_ms=1_000
    )
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        job = await system.submit(origin.url("/slow/revoked"), cache_mode=CacheMode.BYPASS)
        await system.events.wait_for(lambda _: bool(kinds_of(system, job, AttemptStarted)))
        (started,) = kinds_of(system, job, AttemptStarted)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
            cancelled = await http.post(f"/jobs/{job}/cancel", json={"reason": "no longer needed"})
            assert cancelled.status_code == 200, cancelled.text
        # Past the next renewal and the fetch's own deadline: a fetch still running would have
        # renewed (answered as stale) and then timed out and reported (stale too).
        await asyncio.sleep(RUNTIME_MS / 1000)
        assert kinds_of(system, job, StaleReportIgnored) == []
        due = await read_topic(broker.bootstrap, settings.topic("due"), settings.partitions)
        revoked = [decode(r.value) for r in due if isinstance(decode(r.value), LeaseRevoked)]
        assert [(r.job_id, r.lease_id, r.reason) for r in revoked] == [
            (job, started.lease_id, "the job was cancelled")
        ]
        assert origin.hits["/slow/revoked"] == 1
