"""A worker restarted with its data directory kept finishes jobs in flight, none twice."""

import asyncio

import pytest

from schemas.enums import AttemptOutcome, JobStatus
from schemas.events import AttemptRecorded, JobCancelled, JobDeadLettered, JobSucceeded
from streams.settings import Settings
from streams.worker import Worker
from tests.e2e.conftest import Origin, System, running_system, worker_settings
from tests.servers import loopback

pytestmark = pytest.mark.asyncio(loop_scope="module")
JOBS = 30
TERMINAL = (JobSucceeded, JobDeadLettered, JobCancelled)


async def test_jobs_in_flight_across_a_restart_finish_exactly_once(broker, tmp_path):
    held = Origin()  # its own origin: the test alone lets its slow pages answer, after the restart
    async with loopback(held.handle) as held.port:
        settings = worker_settings(
            broker.bootstrap,
            tmp_path,
            profiles={"http.fetch": (3_000, 5)},
            lease_grace_ms=1_000,
            shutdown_grace_s=1.0,
        )
        async with running_system(settings) as system:
            await restarted_with_work_in_flight(system, held, settings)


async def restarted_with_work_in_flight(system: System, held: Origin, settings: Settings) -> None:
    """Three quick jobs end, 27 hang on their page; the worker stops, the pages answer, another ends them."""
    quick = [await system.submit(held.url(f"/page/restart-{n}")) for n in range(3)]
    slow = [await system.submit(held.url(f"/slow/restart-{n}")) for n in range(JOBS - 3)]
    job_ids = quick + slow
    await system.completions.wait_for(lambda records: len(records) >= 3)
    assert system.worker is not None
    await system.worker.stop()
    assert len(system.completions.records) < JOBS, "the restart must interrupt work in flight"
    held.release.set()
    system.worker = Worker(settings)
    await system.worker.start()
    for (
        job_id
    ) in job_ids:  # work the stopped worker had not begun was given back, not left to its start window
        assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED
    await system.events.wait_for(
        lambda events: sum(isinstance(e, TERMINAL) for e in events) >= JOBS, timeout_s=30
    )
    await asyncio.sleep(1)  # room for a duplicate to show up, were there one
    for job_id in job_ids:
        assert len(system.completions.of_job(job_id)) == 1
        assert sum(isinstance(e, TERMINAL) for e in system.events.of_job(job_id)) == 1
        assert system.event_kinds(job_id).count("JobAccepted") == 1
    given_back = [
        event
        for event in system.events.records
        if isinstance(event, AttemptRecorded) and event.attempt.failure is not None
        if event.attempt.failure.code == "WORKER_STOPPED"
    ]
    assert given_back, "the stopped worker gives back the work it had not begun"
    assert all(event.attempt.outcome is AttemptOutcome.DENIED for event in given_back)  # uncharged
