"""Exactly once holds on the secured cluster: a worker logged in as `worker` with only the `worker`
ACLs (its transactions under its own transactional ids), SIGKILLed again and again while a producer
principal's jobs run, leaves exactly one completion per job for a `read_committed` reader, none lost."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from pathlib import Path
from uuid import uuid4

import pytest

from bench.kafka import KafkaCluster
from bench.secured import ADMIN
from schemas.events import JobCompleted
from streams.settings import load_settings
from tests.e2e.conftest import observed_system
from tests.faults.harness import WorkerProcess, check_log, report, worker_environment, workers
from tests.faults.origins import hostile_origin
from tests.faults.scenarios import all_terminal, distinct_completions, until
from tests.faults.test_kafka_cluster import submit_all
from tests.secured.harness import made

pytestmark = [
    pytest.mark.asyncio(loop_scope="function"),
    pytest.mark.xdist_group("kafka"),
    pytest.mark.timeout(600),
]
JOBS = 400
KILLS = 3


async def test_a_worker_killed_three_times_on_the_secured_cluster_leaves_one_completion_per_job(
    secured_kafka: KafkaCluster, tmp_path: Path
):
    deployment = await made(secured_kafka, f"x{uuid4().hex[:8]}")
    await deployment.grant("worker", "worker")
    await deployment.grant("producer", "producer")
    login = deployment.as_user("worker", create_topics="false", processing_guarantee="exactly_once")
    environment = worker_environment(
        secured_kafka.bootstrap, deployment.prefix, tmp_path / "worker", session_timeout_ms=6_000, **login
    )
    worker = WorkerProcess(environment, "secured")
    chance = random.Random(11)
    async with (
        hostile_origin() as origin,
        workers(worker),
        observed_system(load_settings(**deployment.settings(ADMIN))) as system,
    ):
        await worker.start()
        job_ids = await submit_all(load_settings(**deployment.settings("producer")), origin, "page", JOBS)
        for kill in range(KILLS):
            target = JOBS * (kill + 1) // (KILLS + 2)
            await until(lambda target=target: distinct_completions(system) >= target, 300)
            await asyncio.sleep(chance.uniform(0, 0.3))
            worker.kill()
            await worker.wait_dead()
            await worker.start()
        await all_terminal(system, job_ids, timeout_s=300)
        await worker.stop()
        requests = {job_id: origin.requests[f"page-{n}"] for n, job_id in enumerate(job_ids)}
        counts = check_log(
            "secured-crash-loop",
            job_ids,
            system.events.records,
            system.completions.records,
            requests,
            5,
            KILLS,
        )
    per_job = Counter(c.job_id for c in system.completions.records if isinstance(c, JobCompleted))
    counts.notes = {"kills": KILLS, "workers": 1, "brokers": 1, "cluster": "SASL_SSL, ACLs"}
    report(counts)
    assert counts.lost == 0
    assert set(per_job) == set(job_ids)
    assert counts.duplicate_completions == 0, counts
    logs = "".join(path.read_text(errors="replace") for path in worker.data_dir.glob("*.log"))
    assert deployment.secured.users["worker"] not in logs  # logged at `-v` all along, never its password
