"""Leases without an executor: started work that never reports is reaped and charged; work nobody
started is re-dispatched and costs nothing."""

from uuid import uuid5

import httpx
import pytest
import pytest_asyncio

from schemas.commands import ReportAttempt, StartAttempt
from schemas.enums import ArtifactTrust, AttemptOutcome, ExpiryReason, JobStatus, TransportRoute
from schemas.events import LeaseExpired, StaleReportIgnored
from schemas.records import Attempt
from schemas.work import DueWork
from streams.clock import utc_now
from streams.runtime.publisher import Publisher, outgoing
from tests.brokers import profile
from tests.e2e.conftest import Observer, running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(broker, tmp_path_factory):
    settings = worker_settings(
        broker.bootstrap,
        tmp_path_factory.mktemp("no-executor"),
        executor_concurrency=0,
        profiles={"http.fetch": (200, 3)},
        lease_grace_ms=1_500,
        start_window_ms=1_000,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            "streams.readers.fleet.SETTLE_S", 3_600.0
        )  # the tests play the executor, announcing nothing
        async with running_system(settings) as running:
            yield running


def report_for(work: DueWork) -> ReportAttempt:
    attempt = Attempt(
        attempt_number=work.attempt_number,
        lease_id=work.lease_id,
        route=TransportRoute.DIRECT,
        outcome=AttemptOutcome.FETCHED,
        trust=ArtifactTrust.VERIFIED,
        http_status=200,
        finished_at=utc_now(),
    )
    return ReportAttempt(command_id=uuid5(work.lease_id, "report"), job_id=work.job_id, attempt=attempt)


def start_of(work: DueWork) -> StartAttempt:
    return StartAttempt(
        command_id=uuid5(work.lease_id, "start"),
        job_id=work.job_id,
        attempt_number=work.attempt_number,
        lease_id=work.lease_id,
    )


async def test_a_lease_whose_executor_died_is_expired_retried_and_a_late_report_is_stale(system, origin):
    due = await Observer(system.settings.kafka_access, system.settings.topic("due")).start()
    publisher = Publisher(system.settings.kafka_access, profile(system.settings.kafka_bootstrap))
    await publisher.start()
    try:
        job_id = await system.submit(origin.url("/page/reaped"))
        # The first lease is taken by an executor that starts the work and dies: no report, no renewal.
        await due.wait_for(lambda works: any(w.job_id == job_id for w in works))
        commands = system.settings.topic("commands")
        first = next(w for w in due.records if w.job_id == job_id)
        await publisher.send_all([outgoing(commands, str(job_id), start_of(first))])
        await due.wait_for(lambda works: len([w for w in works if w.job_id == job_id]) >= 2)
        second = [w for w in due.records if w.job_id == job_id][1]
        assert (first.attempt_number, second.attempt_number) == (1, 2)
        assert first.lease_id != second.lease_id
        await publisher.send_all([outgoing(commands, str(job_id), report_for(second))])
        completion = await system.completion(job_id)
        await publisher.send_all([outgoing(commands, str(job_id), report_for(first))])
        await system.events.wait_for(lambda _: "StaleReportIgnored" in system.event_kinds(job_id))
    finally:
        await publisher.stop()
        await due.stop()
    assert completion.status is JobStatus.SUCCEEDED
    events = system.events.of_job(job_id)
    expired = [e for e in events if isinstance(e, LeaseExpired)]
    assert expired[0].attempt_number == 1
    assert expired[0].reason is ExpiryReason.EXPIRED
    stale = next(e for e in events if isinstance(e, StaleReportIgnored))
    assert stale.lease_id == first.lease_id
    assert system.event_kinds(job_id).count("JobSucceeded") == 1
    assert len(system.completions.of_job(job_id)) == 1


async def test_work_nobody_starts_is_redispatched_without_spending_the_budget(system, origin):
    due = await Observer(system.settings.kafka_access, system.settings.topic("due")).start()
    try:
        job_id = await system.submit(origin.url("/page/unstarted"), attempt_limit=1)
        # No executor runs here: each lease lapses unstarted and the job is dispatched again.
        await due.wait_for(lambda works: len([w for w in works if w.job_id == job_id]) >= 3, timeout_s=30)
    finally:
        await due.stop()
    await system.events.wait_for(lambda _: system.event_kinds(job_id).count("LeaseExpired") >= 2)
    expired = [e for e in system.events.of_job(job_id) if isinstance(e, LeaseExpired)]
    assert {e.reason for e in expired} == {ExpiryReason.NOT_STARTED}
    assert "JobDeadLettered" not in system.event_kinds(job_id)
    assert not system.completions.of_job(job_id)


async def test_a_worker_whose_executor_runs_nothing_says_so_for_every_type(system):
    assert system.worker is not None
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        listed = {item["name"]: item for item in (await http.get("/job-types")).json()["items"]}
    for name in ("http.fetch", "browser.render"):
        assert listed[name]["runs_here"] is False  # what it reads, not what it could
        assert "SCRAPESTREAM_EXECUTOR_CONCURRENCY is 0" in listed[name]["not_run_here_because"]
