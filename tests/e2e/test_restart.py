"""A worker restarted with its data directory kept finishes jobs in flight, none twice."""

import asyncio

import pytest

from schemas.enums import JobStatus
from schemas.events import JobCancelled, JobDeadLettered, JobSucceeded
from streams.worker import Worker
from tests.e2e.conftest import running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")
JOBS = 30
TERMINAL = (JobSucceeded, JobDeadLettered, JobCancelled)


async def test_jobs_in_flight_across_a_restart_finish_exactly_once(broker, origin, tmp_path):
    settings = worker_settings(
        broker.bootstrap, tmp_path, profiles={"http.fetch": (1_000, 5)}, lease_grace_ms=1_000
    )
    async with running_system(settings) as system:
        job_ids = [await system.submit(origin.url(f"/page/restart-{n}")) for n in range(JOBS)]
        await system.completions.wait_for(lambda records: len(records) >= 3)
        await system.worker.stop()
        assert len(system.completions.records) < JOBS, "the restart must interrupt work in flight"
        system.worker = Worker(settings)
        await system.worker.start()
        for job_id in job_ids:
            assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED
        await system.events.wait_for(
            lambda events: sum(isinstance(e, TERMINAL) for e in events) >= JOBS, timeout_s=30
        )
        await asyncio.sleep(1)  # room for a duplicate to show up, were there one
        for job_id in job_ids:
            assert len(system.completions.of_job(job_id)) == 1
            assert sum(isinstance(e, TERMINAL) for e in system.events.of_job(job_id)) == 1
            assert system.event_kinds(job_id).count("JobAccepted") == 1
