"""Apache Kafka only: a three-broker KRaft cluster (replication factor 3, `min.insync.replicas` 2,
`acks=all`, idempotent producers) whose brokers die, stall and come back under a running worker.

Each scenario keeps the invariants of `harness.check_log` and reports its counts and recovery times
(`SCRAPESTREAM_FAULT_REPORT=faults.jsonl`), recorded in docs/RELIABILITY.md. The cluster is started
once for the session (`kafka_cluster`); every scenario leaves all three brokers running.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from bench.kafka import KafkaCluster
from projections.lifecycle.submission import submission_identity
from schemas.commands import SubmitJob
from schemas.enums import JobStatus
from schemas.records import Request
from streams.broker.compat import KAFKA
from streams.clock import utc_now
from streams.runtime.publisher import Publisher, outgoing
from streams.settings import Settings
from tests.faults.harness import (
    FaultCounts,
    Stopwatch,
    WorkerProcess,
    assert_stores_match_the_log,
    check_log,
    report,
    settings_of,
    worker_environment,
    workers,
)
from tests.faults.origins import HostileOrigin, hostile_origin
from tests.faults.scenarios import (
    all_terminal,
    distinct_completions,
    observe,
    prefix,
    two_workers_one_killed,
    until,
)

pytestmark = [
    pytest.mark.asyncio(loop_scope="function"),
    pytest.mark.timeout(900),
    pytest.mark.xdist_group("kafka"),  # with the Kafka pass: one process starts every Kafka JVM
]

REPLICATED = {"replication_factor": 3, "min_insync_replicas": 2}
JOBS = 3_000


@pytest.fixture
async def all_brokers_back(kafka_cluster: KafkaCluster) -> AsyncIterator[None]:
    """Whatever a scenario did to a broker, the next one starts with all three running."""
    yield
    for node in kafka_cluster.members:
        kafka_cluster.resume(node.node_id)
        await kafka_cluster.restart(node.node_id)


class Progress:
    """Distinct completions over time, to tell how long a fault stalled the run."""

    def __init__(self, system: Any) -> None:
        self._system = system
        self.samples: list[tuple[float, int]] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Progress:
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _sample(self) -> None:
        while True:
            self.samples.append((time.monotonic(), distinct_completions(self._system)))
            await asyncio.sleep(0.1)

    def first_progress_after(self, at: float) -> float:
        """Seconds from `at` to the first new completion after it."""
        before = max((count for when, count in self.samples if when <= at), default=0)
        after = [when for when, count in self.samples if when > at and count > before]
        return round(after[0] - at, 2) if after else float("nan")

    def longest_stall_after(self, at: float) -> float:
        """The longest time after `at` without a new completion, while jobs were left."""
        stall, last_when, last_count = 0.0, at, None
        for when, count in self.samples:
            if when < at:
                continue
            if count != last_count:
                stall, last_when, last_count = max(stall, when - last_when), when, count
        return round(stall, 2)


async def submit_all(
    settings: Settings, origin: HostileOrigin, behaviour: str, count: int, name: str | None = None
) -> list[UUID]:
    """`count` jobs on the submit topic in a few large batches, as a busy producer sends them; the
    origin counts the requests of job `n` under `<name>-<n>` (`name` defaults to the behaviour)."""
    commands = [
        SubmitJob(
            caller_identity="faults",
            request=Request(url=origin.url(behaviour, f"{name or behaviour}-{n}")),
            deadline_at=utc_now() + timedelta(minutes=15),
        )
        for n in range(count)
    ]
    publisher = Publisher(settings.kafka_access, KAFKA)
    await publisher.start()
    job_ids = []
    try:
        for start in range(0, count, 500):
            batch = []
            for command in commands[start : start + 500]:
                job_id, _ = submission_identity(command)
                job_ids.append(job_id)
                batch.append(outgoing(settings.topic("submit"), str(job_id), command))
            await publisher.send_all(batch)
    finally:
        await publisher.stop()
    return job_ids


async def in_sync_again(
    cluster: KafkaCluster, topics: list[str], node_id: int, timeout_s: float = 120
) -> float:
    """Seconds until `node_id` is back in the in-sync replicas of every partition of `topics`."""
    started = time.monotonic()
    admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    await admin.start()
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                described = await admin.describe_topics(topics)
                if all(node_id in p["isr"] for topic in described for p in topic["partitions"]):
                    return round(time.monotonic() - started, 2)
                await asyncio.sleep(0.5)
    finally:
        await admin.close()


async def run_through(
    cluster: KafkaCluster,
    tmp_path: Path,
    scenario: str,
    fault: Callable[[KafkaCluster, Settings], Awaitable[dict[str, Any]]],
    behaviour: str = "page",
    jobs: int = JOBS,
) -> FaultCounts:
    """One worker, `jobs` jobs; `fault` strikes once a fifth of them are done, the worker runs on."""
    environment = worker_environment(
        cluster.bootstrap,
        prefix(),
        tmp_path / "worker",
        partitions=4,
        executor_concurrency=32,
        host_concurrency=32,
        profiles=json.dumps({"http.fetch": [10_000, 5]}),
        processes="auto",  # a broker lost under a worker of every core's processes
        **REPLICATED,
    )
    settings = settings_of(environment)
    worker = WorkerProcess(environment)
    watch = Stopwatch()
    async with hostile_origin() as origin, workers(worker):
        await worker.start()
        system = await observe(settings)
        async with Progress(system) as progress:
            submitted = Stopwatch()
            job_ids = await submit_all(settings, origin, behaviour, jobs)
            await until(lambda: distinct_completions(system) >= jobs // 5, 300)
            struck_at = time.monotonic()
            notes = await fault(cluster, settings)
            await all_terminal(system, job_ids, timeout_s=600)
            run_s = submitted.lap()
        assert worker.process is not None
        assert worker.process.returncode is None, "the worker died"
        await worker.stop()
        assert worker.starts == 1
        requests = {job_id: origin.requests[f"{behaviour}-{n}"] for n, job_id in enumerate(job_ids)}
        counts = check_log(
            scenario, job_ids, system.events.records, system.completions.records, requests, 5, crash_window=1
        )
    await assert_stores_match_the_log([environment], system.events)
    assert {c.status for c in system.completions.records} == {JobStatus.SUCCEEDED}
    counts.recovery_s = [progress.first_progress_after(struck_at)]
    counts.notes = notes | {
        "longest_stall_s": progress.longest_stall_after(struck_at),
        "run_s": run_s,
        "elapsed_s": watch.lap(),
        "brokers": 3,
    }
    report(counts)
    return counts


def topics_of(settings: Settings) -> list[str]:
    return [settings.topic(name) for name in ("submit", "commands", "events", "completions")]


async def kill_and_restart(cluster: KafkaCluster, settings: Settings, node_id: int) -> dict[str, Any]:
    cluster.kill(node_id)
    killed = Stopwatch()
    await asyncio.sleep(10)  # the run goes on without it for a while
    await cluster.restart(node_id)
    serving = killed.lap()
    back = await in_sync_again(cluster, topics_of(settings), node_id)
    return {"killed_node": node_id, "restarted_serving_after_s": serving, "back_in_sync_after_s": back}


async def test_the_partition_leaders_broker_killed_mid_run_loses_no_job(
    kafka_cluster, tmp_path, all_brokers_back
):
    async def kill_the_leader(cluster: KafkaCluster, settings: Settings) -> dict[str, Any]:
        leaders = list((await cluster.leaders(settings.topic("events"))).values())
        node_id = max(set(leaders), key=leaders.count)  # the broker leading most event partitions
        return await kill_and_restart(cluster, settings, node_id) | {
            "led_events_partitions": leaders.count(node_id)
        }

    await run_through(kafka_cluster, tmp_path, "kafka-leader-killed", kill_the_leader)


async def test_the_active_controller_killed_mid_run_loses_no_job(kafka_cluster, tmp_path, all_brokers_back):
    async def kill_the_controller(cluster: KafkaCluster, settings: Settings) -> dict[str, Any]:
        node_id = cluster.active_controller()
        notes = await kill_and_restart(cluster, settings, node_id)
        return notes | {"new_controller": cluster.active_controller()}

    await run_through(kafka_cluster, tmp_path, "kafka-controller-killed", kill_the_controller)


async def test_a_broker_stalled_past_the_session_timeout_then_resumed_loses_no_job(
    kafka_cluster, tmp_path, all_brokers_back
):
    stalled_s = KAFKA.session_timeout_ms / 1000 + 5

    async def stall(cluster: KafkaCluster, settings: Settings) -> dict[str, Any]:
        leaders = list((await cluster.leaders(settings.topic("commands"))).values())
        node_id = max(set(leaders), key=leaders.count)
        cluster.pause(node_id)
        await asyncio.sleep(stalled_s)
        cluster.resume(node_id)
        back = await in_sync_again(cluster, topics_of(settings), node_id)
        return {"stalled_node": node_id, "stalled_s": stalled_s, "back_in_sync_after_s": back}

    # Slower jobs: the run outlasts the stall.
    await run_through(kafka_cluster, tmp_path, "kafka-broker-stalled", stall, jobs=JOBS)


async def test_two_workers_on_the_cluster_one_killed_the_survivor_finishes_every_partition(
    kafka_cluster, tmp_path
):
    report(
        await two_workers_one_killed(
            kafka_cluster.bootstrap, tmp_path, "kafka-two-workers-one-killed", **REPLICATED
        )
    )
