"""Two workers in one group share the partitions; every job still finishes exactly once, and each worker
decides what it holds without the commands topic."""

from collections import Counter
from uuid import UUID

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from schemas.codec import decode
from schemas.commands import ReportAttempt, SubmitJob
from schemas.enums import JobStatus
from schemas.events import JobCancelled, JobDeadLettered, JobSucceeded
from streams.settings import Settings
from streams.worker import Worker
from tests.e2e.conftest import read_topic, running_system, settled_ownership, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")
JOBS = 20
TERMINAL = (JobSucceeded, JobDeadLettered, JobCancelled)


async def test_two_workers_split_the_partitions_and_finish_every_job_once(broker, origin, tmp_path):
    settings = worker_settings(broker.bootstrap, tmp_path / "a", partitions=4)
    async with running_system(settings) as system:
        second = Worker(settings.model_copy(update={"data_dir": tmp_path / "b"}))
        await second.start()
        try:
            job_ids = [await system.submit(origin.url(f"/page/pair-{n}")) for n in range(JOBS)]
            for job_id in job_ids:
                assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED
            await system.events.wait_for(lambda events: sum(isinstance(e, TERMINAL) for e in events) >= JOBS)
            owned = await settled_ownership(system.worker, second)
        finally:
            await second.stop()
        assert sorted(owned[0] + owned[1]) == [0, 1, 2, 3]
        assert owned[0]
        assert owned[1]
        for job_id in job_ids:
            assert len(system.completions.of_job(job_id)) == 1
            assert sum(isinstance(e, TERMINAL) for e in system.events.of_job(job_id)) == 1


async def commands_sent(worker: Worker) -> Counter[str]:
    """The worker's `scrapestream_commands_sent`, by how."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{worker.web_port}/metrics")).text
    sent: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name == "scrapestream_commands_sent":
            for sample in family.samples:
                sent[sample.labels["how"]] += int(sample.value)
    return sent


async def submissions_and_reports(settings: Settings, job_ids: set[UUID]) -> list[str]:
    """The kinds of the commands topic's records of `job_ids` that intake and the executor wrote."""
    records = await read_topic(settings.kafka_bootstrap, settings.topic("commands"), 4)
    ours = [decode(record.value) for record in records if UUID(record.key.decode()) in job_ids]
    return [type(command).__name__ for command in ours if isinstance(command, SubmitJob | ReportAttempt)]


async def test_a_worker_decides_what_it_holds_itself_and_publishes_the_rest(broker, origin, tmp_path):
    settings = worker_settings(broker.bootstrap, tmp_path / "a", partitions=4)
    async with running_system(settings) as system:
        first = system.worker
        assert first is not None
        await settled_ownership(first)  # caught up: a submission read before then is published
        alone = {await system.submit(origin.url(f"/page/alone-{n}")) for n in range(JOBS)}
        for job_id in alone:
            assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED
        assert (await commands_sent(first))["handed_over"] == 2 * JOBS  # each submission and report
        assert await submissions_and_reports(settings, alone) == []

        second = Worker(settings.model_copy(update={"data_dir": tmp_path / "b"}))
        await second.start()
        try:
            owned = await settled_ownership(first, second)
            assert owned[0]
            assert owned[1]
            before = await commands_sent(first)
            shared = {await system.submit(origin.url(f"/page/shared-{n}")) for n in range(JOBS)}
            for job_id in shared:
                assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED
            sent = await commands_sent(first) + await commands_sent(second)
        finally:
            await second.stop()
        sent.subtract(before)
        assert sent["handed_over"] + sent["published"] == 2 * JOBS  # each went one way first
        on_topic = await submissions_and_reports(settings, shared)
        assert len(on_topic) == sent["published"] + sent["handed_back"]
        for job_id in alone | shared:
            assert len(system.completions.of_job(job_id)) == 1
