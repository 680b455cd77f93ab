"""A worker killed with SIGKILL mid-work: after a restart every job finishes, no event twice."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from uuid import uuid4

import pytest

from schemas.enums import JobStatus
from schemas.events import JobCancelled, JobDeadLettered, JobSucceeded
from streams.settings import load_settings
from tests.e2e.conftest import observed_system

pytestmark = pytest.mark.asyncio(loop_scope="module")
SCRAPESTREAM = str(Path(sys.executable).with_name("scrapestream"))
JOBS = 30
TERMINAL = (JobSucceeded, JobDeadLettered, JobCancelled)


async def start_worker(environment: dict[str, str]) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        SCRAPESTREAM,
        "worker",
        env=environment,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 60)
    assert b"serving HTTP" in line, line
    return process


async def test_a_killed_worker_loses_nothing_and_appends_no_event_twice(broker, origin, tmp_path):
    prefix = f"t{uuid4().hex[:8]}"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPESTREAM_")} | {
        "SCRAPESTREAM_KAFKA_BOOTSTRAP": broker.bootstrap,
        "SCRAPESTREAM_BROKER_PROFILE": "embedded",
        "SCRAPESTREAM_DATA_DIR": str(tmp_path),
        "SCRAPESTREAM_WEB_PORT": "0",
        "SCRAPESTREAM_PARTITIONS": "2",
        "SCRAPESTREAM_TOPIC_PREFIX": prefix,
        "SCRAPESTREAM_GROUP_ID": prefix,
        "SCRAPESTREAM_ALLOW_PRIVATE_NETWORKS": "1",
        "SCRAPESTREAM_PROFILES": json.dumps({"http.fetch": [1000, 5]}),
        "SCRAPESTREAM_LEASE_GRACE_MS": "1000",
        "SCRAPESTREAM_RETRY_BASE_MS": "300",
        "SCRAPESTREAM_EXECUTOR_CONCURRENCY": "2",
    }
    settings = load_settings(kafka_bootstrap=broker.bootstrap, topic_prefix=prefix)
    worker = await start_worker(environment)
    async with observed_system(settings) as system:
        try:
            job_ids = [await system.submit(origin.url(f"/sleep/200/crash-{n}")) for n in range(JOBS)]
            await system.completions.wait_for(lambda records: len(records) >= 3)
            worker.send_signal(signal.SIGKILL)
            await worker.wait()
            assert len({c.job_id for c in system.completions.records}) < JOBS, "the kill must interrupt work"
            worker = await start_worker(environment)
            for job_id in job_ids:
                assert (await system.completion(job_id, timeout_s=90)).status is JobStatus.SUCCEEDED
            await system.events.wait_for(lambda events: sum(isinstance(e, TERMINAL) for e in events) >= JOBS)
        finally:
            if worker.returncode is None:
                worker.send_signal(signal.SIGTERM)
                await asyncio.wait_for(worker.wait(), 60)
    for job_id in job_ids:
        events = system.events.of_job(job_id)
        assert sum(isinstance(e, TERMINAL) for e in events) == 1
        assert system.event_kinds(job_id).count("JobAccepted") == 1
        assert [e.sequence for e in events] == list(range(1, len(events) + 1))
        assert len({e.event_id for e in events}) == len(events)
        # A kill between publishing a completion and appending its event may repeat the completion.
        assert {c.status for c in system.completions.of_job(job_id)} == {JobStatus.SUCCEEDED}
