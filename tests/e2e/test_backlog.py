"""A due-topic backlog longer than the start window slows jobs down; it never spends their budgets."""

from __future__ import annotations

import pytest

from schemas.enums import ExpiryReason, JobStatus
from schemas.events import LeaseExpired
from tests.e2e.conftest import running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_work_waiting_past_its_start_window_is_redispatched_uncharged_and_runs_once(
    broker, tmp_path, origin
):
    settings = worker_settings(
        broker.bootstrap,
        tmp_path,
        executor_concurrency=1,
        start_window_ms=1_000,
        lease_grace_ms=1_000,
        profiles={"http.fetch": (3_000, 1)},
    )
    async with running_system(settings) as system:
        jobs = [await system.submit(origin.url(f"/sleep/600?job={index}")) for index in range(6)]
        completions = [await system.completion(job_id, timeout_s=120) for job_id in jobs]
    assert {c.status for c in completions} == {JobStatus.SUCCEEDED}
    expired = [e for job_id in jobs for e in system.events.of_job(job_id) if isinstance(e, LeaseExpired)]
    assert expired, "the backlog outlasted the start window"
    assert {e.reason for e in expired} == {ExpiryReason.NOT_STARTED}
    # One request per job: work that waited too long was never started, so never run twice.
    assert origin.hits["/sleep/600"] == len(jobs)
    assert all(c.attempt_count == 1 for c in completions)
