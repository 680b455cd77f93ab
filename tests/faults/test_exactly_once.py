"""Apache Kafka only, on the three-broker cluster: with `exactly_once`, a worker SIGKILLed at random
moments again and again (and a broker killed meanwhile) leaves exactly one `JobCompleted` per job
for a `read_committed` reader; the same run `at_least_once` shows the duplicates it allows. A
worker SIGSTOPped past its session timeout is fenced when it wakes, and serves again; a commit the
cluster leaves unanswered gives up in bounded time.

Counts and times are reported (`SCRAPESTREAM_FAULT_REPORT=faults.jsonl`) for docs/RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from aiokafka import TopicPartition

from bench.kafka import KafkaCluster
from schemas.codec import decode
from schemas.events import JobCompleted
from streams.broker.access import plaintext
from streams.broker.compat import KAFKA, end_offsets, new_producer, records_between
from streams.runtime import transactions
from streams.runtime.commit_order import Batch
from tests.faults.harness import (
    Stopwatch,
    WorkerProcess,
    assert_stores_match_the_log,
    check_log,
    report,
    settings_of,
    worker_environment,
    workers,
)
from tests.faults.origins import hostile_origin
from tests.faults.scenarios import all_terminal, distinct_completions, observe, prefix, until
from tests.faults.test_kafka_cluster import REPLICATED, submit_all
from tests.integration.test_brokers import create_topic
from tests.integration.test_transactions import (
    committed_offset,
    committed_values,
    one,
    one_record_batch,
    publishing,
)

pytestmark = [
    pytest.mark.asyncio(loop_scope="function"),
    pytest.mark.timeout(900),
    pytest.mark.xdist_group("kafka"),  # with the Kafka pass: one process starts every Kafka JVM
]
JOBS = 5_000
KILLS = 10
SESSION_TIMEOUT_MS = 6_000  # each kill waits this long for the dead member: ten kills fit a test
ZOMBIE_ROUNDS = 4


# The at_least_once run is the contrast (its duplicates are what consumers dedupe): a soak, not the suite.
@pytest.mark.parametrize("guarantee", ["exactly_once", pytest.param("at_least_once", marks=pytest.mark.soak)])
async def test_a_worker_killed_ten_times_leaves_one_completion_per_job_only_with_exactly_once(
    kafka_cluster: KafkaCluster, tmp_path, guarantee
):
    environments = two_workers(
        kafka_cluster,
        tmp_path,
        ("a", "b"),
        concurrency=16,
        processing_guarantee=guarantee,
        profiles=json.dumps({"http.fetch": [10_000, 5]}),
        processes="auto",  # every process of a worker SIGKILLed at once, as a container's are
    )
    pair = [WorkerProcess(environments[0], "a"), WorkerProcess(environments[1], "b")]
    settings = settings_of(environments[0])
    chance = random.Random(7)
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
        requests = {job_id: origin.requests[f"page-{n}"] for n, job_id in enumerate(job_ids)}
        counts = check_log(
            f"crash-loop-{guarantee.replace('_', '-')}",
            job_ids,
            system.events.records,
            system.completions.records,
            requests,
            5,
            crash_window=KILLS,
        )
        await assert_stores_match_the_log(environments, system.events)
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
    answers = await answers_per_record(settings.kafka_bootstrap, settings.topic("answers"))
    assert len(answers) == JOBS  # every submit record answered
    if guarantee == "exactly_once":
        assert counts.duplicate_completions == 0, counts
        assert max(answers.values()) == 1


async def answers_per_record(bootstrap: str, topic: str) -> Counter[tuple[int, int]]:
    """How many answers each submit record has, as a `read_committed` consumer sees them."""
    found: Counter[tuple[int, int]] = Counter()
    for partition in [TopicPartition(topic, p) for p in range(4)]:
        end = (await end_offsets(plaintext(bootstrap), [partition], KAFKA))[partition]
        async for records in records_between(
            plaintext(bootstrap), partition, None, end, isolation_level="read_committed"
        ):
            for record in records:
                answer = decode(record.value)
                found[(answer.source_partition, answer.source_offset)] += 1
    return found


def two_workers(
    cluster: KafkaCluster, tmp_path: Path, names: tuple[str, str], concurrency: int, **settings: Any
) -> list[dict[str, str]]:
    """The environments of two workers sharing four partitions of replicated topics."""
    name = prefix()
    return [
        worker_environment(
            cluster.bootstrap,
            name,
            tmp_path / side,
            partitions=4,
            executor_concurrency=concurrency,
            host_concurrency=concurrency,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            **REPLICATED,
            **settings,
        )
        for side in names
    ]


async def kill_a_broker(cluster: KafkaCluster, topic: str) -> dict[str, Any]:
    """SIGKILL the broker leading most partitions of `topic`, bring it back after a few seconds."""
    leaders = list((await cluster.leaders(topic)).values())
    node_id = max(set(leaders), key=leaders.count)
    cluster.kill(node_id)
    await asyncio.sleep(5)
    await cluster.restart(node_id)
    return {"killed_broker": node_id}


async def test_a_worker_stopped_past_its_session_is_fenced_when_it_wakes_and_then_serves_again(
    kafka_cluster: KafkaCluster, tmp_path
):
    """SIGSTOP a busy worker past its session timeout: its partitions move, and once continued,
    nothing it had in hand becomes visible; it counts the fence, rejoins and commits again."""
    environments = two_workers(
        kafka_cluster,
        tmp_path,
        ("zombie", "successor"),
        concurrency=32,
        processing_guarantee="exactly_once",
        start_window_ms=30_000,  # work queued for the stopped worker starts late, not dispatched again
    )
    zombie, successor = WorkerProcess(environments[0], "zombie"), WorkerProcess(environments[1], "successor")
    settings = settings_of(environments[0])
    async with hostile_origin() as origin, workers(zombie, successor):
        for worker in (zombie, successor):
            await worker.start()
        system = await observe(settings)
        await until_true(lambda: owners_settled(zombie, successor), 60)
        watch = Stopwatch()
        named: dict[UUID, str] = {}  # job -> the name the origin counts its requests under
        fenced, rounds = 0.0, 0
        # Stopped between two batches, a worker has nothing in hand to be fenced over: again, busier.
        while not fenced and rounds < ZOMBIE_ROUNDS:
            rounds += 1
            done = distinct_completions(system)
            batch = await submit_all(settings, origin, "page", 1_000, name=f"page{rounds}")
            named |= {job_id: f"page{rounds}-{n}" for n, job_id in enumerate(batch)}
            await until(lambda done=done: distinct_completions(system) >= done + 100, 120)
            zombie.pause()
            await until_true(lambda: holds_all(successor, settings.partitions), 60)
            zombie.resume()
            await until_true(lambda: holds_some(zombie), 120)
            fenced = await zombie.metric('scrapestream_transactions{result="fenced"}')
        committed_before = await zombie.metric('scrapestream_transactions{result="committed"}')
        second = await submit_all(settings, origin, "sleep", 200)
        named |= {job_id: f"sleep-{n}" for n, job_id in enumerate(second)}
        await all_terminal(system, list(named), timeout_s=300)
        committed_after = await zombie.metric('scrapestream_transactions{result="committed"}')
        for worker in (zombie, successor):
            await worker.stop()
        requests = {job_id: origin.requests[name] for job_id, name in named.items()}
        counts = check_log(
            "zombie-fenced",
            list(named),
            system.events.records,
            system.completions.records,
            requests,
            5,
            crash_window=1,
        )
        await assert_stores_match_the_log(environments, system.events)
    counts.notes = {
        "fenced": fenced,
        "stops": rounds,
        "committed_after_rejoin": committed_after - committed_before,
        "run_s": watch.lap(),
    }
    report(counts)
    assert fenced >= 1
    assert counts.lost == 0
    assert counts.duplicate_completions == 0, counts
    assert counts.duplicate_events_in_log == 0, counts
    assert committed_after > committed_before


async def until_true(check: Callable[[], Awaitable[bool]], timeout_s: float) -> None:
    async def poll() -> None:
        while not await check():  # noqa: ASYNC110 - the state lives in worker processes
            await asyncio.sleep(0.5)

    await asyncio.wait_for(poll(), timeout_s)


async def owners_settled(*pair: WorkerProcess) -> bool:
    return all([await worker.owned() for worker in pair])


async def holds_all(worker: WorkerProcess, partitions: int) -> bool:
    return len(await worker.owned()) == partitions


async def holds_some(worker: WorkerProcess) -> bool:
    return bool(await worker.owned())


async def test_a_commit_the_cluster_leaves_unanswered_lets_its_producer_go_and_the_next_one_ends_it(
    kafka_cluster: KafkaCluster, monkeypatch
):
    """Every broker stopped in the middle of a commit: the commit gives up in bounded time instead
    of holding the partition's batches for good; no new producer can start while the cluster is
    down, so the partition is let go, and its next producer ends the stuck transaction and commits."""
    monkeypatch.setattr(transactions, "COMMIT_WITHIN_S", 3.0)
    # The stopped cluster's every broker answers a new producer's bootstrap only at its request timeout.
    quick = functools.partial(new_producer, request_timeout_ms=5_000)
    monkeypatch.setattr(transactions, "new_producer", quick)
    bootstrap = kafka_cluster.bootstrap
    source, sink, group = await create_topic(bootstrap), await create_topic(bootstrap), prefix()
    tp = TopicPartition(source, 0)
    holder = transactions.PartitionTransactions(plaintext(bootstrap), KAFKA, group)
    async with publishing(bootstrap) as publisher:
        await holder.hold({tp})
        try:

            async def batch_while_the_cluster_stops() -> None:
                async with holder.transaction(tp, 1) as transaction:
                    await publisher.send_all(one(sink, b"stuck"), Batch(transaction))
                    for node in kafka_cluster.members:
                        kafka_cluster.pause(node.node_id)

            try:
                with pytest.raises(transactions.StuckCommitError):
                    await batch_while_the_cluster_stops()
            finally:
                for node in kafka_cluster.members:
                    kafka_cluster.resume(node.node_id)
            with pytest.raises(transactions.NotHeldError):  # it let the stuck producer go
                await one_record_batch(holder, publisher, tp, 1, sink, b"not held")
            await holder.hold({tp})
            await one_record_batch(holder, publisher, tp, 1, sink, b"after")
        finally:
            await holder.close()
    assert await committed_values(bootstrap, sink) == [b"after"]
    assert await committed_offset(bootstrap, group, tp) == 1
