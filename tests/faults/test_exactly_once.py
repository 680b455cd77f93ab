"""Apache Kafka only, on the three-broker cluster: with `exactly_once`, a worker SIGKILLed at random
moments again and again (and a broker killed meanwhile) leaves exactly one `JobCompleted` per job
for a `read_committed` reader; the same run `at_least_once` shows the duplicates it allows.

Counts and times are reported (`SCRAPESTREAM_FAULT_REPORT=faults.jsonl`) for docs/RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from typing import Any

import pytest

from schemas.events import JobCompleted
from streams.broker.kafka import KafkaCluster
from tests.faults.harness import (
    Stopwatch,
    WorkerProcess,
    check_log,
    report,
    settings_of,
    worker_environment,
    workers,
)
from tests.faults.origins import hostile_origin
from tests.faults.scenarios import all_terminal, distinct_completions, observe, prefix, until
from tests.faults.test_kafka_cluster import REPLICATED, submit_all

pytestmark = [
    pytest.mark.asyncio(loop_scope="function"),
    pytest.mark.timeout(900),
    pytest.mark.xdist_group("kafka"),  # with the Kafka pass: one process starts every Kafka JVM
]
JOBS = 5_000
KILLS = 10
SESSION_TIMEOUT_MS = 6_000  # each kill waits this long for the dead member: ten kills fit a test


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
async def test_a_worker_killed_ten_times_leaves_one_completion_per_job_only_with_exactly_once(
    kafka_cluster: KafkaCluster, tmp_path, guarantee
):
    name = prefix()
    environments = [
        worker_environment(
            kafka_cluster.bootstrap,
            name,
            tmp_path / side,
            partitions=4,
            executor_concurrency=16,
            host_concurrency=16,
            processing_guarantee=guarantee,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            profiles=json.dumps({"http.fetch": [10_000, 5]}),
            **REPLICATED,
        )
        for side in ("a", "b")
    ]
    pair = [WorkerProcess(environments[0], "a"), WorkerProcess(environments[1], "b")]
    settings = settings_of(environments[0])
    chance = random.Random(7)  # noqa: S311 - moments, not secrets
    broker_notes: dict[str, Any] = {}
    async with hostile_origin() as origin, workers(*pair):
        for worker in pair:
            await worker.start()
        system = await observe(settings)
        watch = Stopwatch()
        job_ids = await submit_all(settings, origin, "page", JOBS)
        for kill in range(KILLS):
            target = JOBS * (kill + 1) // (KILLS + 2)
            await until(lambda target=target: distinct_completions(system) >= target, 300)
            await asyncio.sleep(chance.uniform(0, 0.5))
            victim = chance.choice(pair)
            victim.kill()
            await victim.wait_dead()
            if kill == KILLS // 2 and guarantee == "exactly_once":
                broker_notes = await kill_a_broker(kafka_cluster, settings.topic("events"))
            await victim.start()
        await all_terminal(system, job_ids, timeout_s=600)
        run_s = watch.lap()
        for worker in pair:
            await worker.stop()
        counts = check_log(
            f"crash-loop-{guarantee.replace('_', '-')}",
            job_ids,
            system.events.records,
            system.completions.records,
        )
    per_job = Counter(c.job_id for c in system.completions.records if isinstance(c, JobCompleted))
    counts.notes = {
        "kills": KILLS,
        "workers": 2,
        "brokers": 3,
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "jobs_with_more_than_one_completion": sum(1 for n in per_job.values() if n > 1),
        "run_s": run_s,
    } | broker_notes
    report(counts)
    assert counts.lost == 0
    assert set(per_job) == set(job_ids)
    if guarantee == "exactly_once":
        assert counts.duplicate_completions == 0, counts


async def kill_a_broker(cluster: KafkaCluster, topic: str) -> dict[str, Any]:
    """SIGKILL the broker leading most partitions of `topic`, bring it back after a few seconds."""
    leaders = list((await cluster.leaders(topic)).values())
    node_id = max(set(leaders), key=leaders.count)
    cluster.kill(node_id)
    await asyncio.sleep(5)
    await cluster.restart(node_id)
    return {"killed_broker": node_id}
