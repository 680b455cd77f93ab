"""Apache Kafka only, on the three-broker cluster: compaction and retention really remove records,
and a fresh worker started afterwards rebuilds exactly what a worker that read everything holds.
Where the events a partition needs are gone with no snapshot covering them, the worker serves none
of that partition and says which partition and what the operator can do."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import msgspec
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from bench.kafka import KafkaCluster
from schemas.binary import EPOCH
from schemas.codec import decode
from schemas.enums import CacheMode
from schemas.events import JobAccepted
from streams.broker.compat import KAFKA, end_offsets, records_between
from streams.clock import utc_now
from streams.readers import ledger
from streams.readers.global_table import EXECUTOR, OFFSET
from streams.runtime.topics import topic_specs
from streams.settings import Settings
from streams.worker import Worker
from tests.e2e.conftest import Origin, System, read_topic, running_system, settled_ownership, worker_settings

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("kafka"),  # with the Kafka pass: one process starts every Kafka JVM
]
PARTITIONS = 2
REPLICATED = {"replication_factor": 3, "min_insync_replicas": 2}
METERED = {"direct": {"kind": "direct", "price_per_gb": "1000", "budget": "1000000"}}
COMPACTED = ("cache", "references", "snapshots", "routes")
RETAINED_S = 4.0


def cluster_settings(cluster: KafkaCluster, data_dir: Path, **overrides: Any) -> Settings:
    return worker_settings(cluster.bootstrap, data_dir, partitions=PARTITIONS, **REPLICATED, **overrides)


@contextlib.asynccontextmanager
async def reader(settings: Settings, data_dir: Path, **overrides: Any) -> AsyncIterator[Worker]:
    """A fresh worker on `data_dir` that only reads (no executor), stopped however the test ends."""
    worker = Worker(settings.model_copy(update={"data_dir": data_dir, "executor_concurrency": 0} | overrides))
    await worker.start()
    try:
        yield worker
    finally:
        await worker.stop()


async def finished(worker: Worker, job_ids: list[UUID]) -> dict[UUID, Any]:
    """`GET /jobs/{id}` of each job, once every one has finished (a deleted history answers 404)."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
        for _ in range(600):
            answers = {job_id: await http.get(f"/jobs/{job_id}") for job_id in job_ids}
            views = {job_id: (a.status_code, a.json()) for job_id, a in answers.items()}
            if all(code == 404 or view.get("state") == "SUCCEEDED" for code, view in views.values()):
                return views
            await asyncio.sleep(0.1)
    raise AssertionError(f"the jobs never all finished: {views}")


async def wave(system: System, origin: Origin, name: str, count: int, **fields: Any) -> list[UUID]:
    jobs = [await system.submit(origin.url(f"/page/{name}-{n}"), **fields) for n in range(count)]
    for job_id in jobs:
        await system.completion(job_id)
    return jobs


async def delete_history(worker: Worker, job_ids: list[UUID]) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
        for job_id in job_ids:
            answer = await http.post(f"/jobs/{job_id}/delete-history", json={"reason": "compaction test"})
            assert answer.status_code in (200, 202), answer.text


async def per_key(settings: Settings, name: str, below: dict[int, int] | None = None) -> Counter[bytes]:
    """How often each key is in the topic (only below `below`'s offset of each partition, if given:
    later writes of a key are no older values)."""
    records = await read_topic(settings.kafka_bootstrap, settings.topic(name), PARTITIONS)
    return Counter(
        record.key for record in records if below is None or record.offset < below.get(record.partition, 0)
    )


async def ends(settings: Settings, name: str) -> dict[int, int]:
    topic = settings.topic(name)
    wanted = [TopicPartition(topic, partition) for partition in range(PARTITIONS)]
    return {
        tp.partition: end for tp, end in (await end_offsets(settings.kafka_access, wanted, KAFKA)).items()
    }


async def until_true(
    check: Callable[[], Any], timeout_s: float, between: Callable[[], Any], left: Callable[[], Any] = str
) -> None:
    """Until the async `check` holds; `between` runs between tries (traffic that rolls segments);
    `left` says what was still missing when it gives up."""
    loop = asyncio.get_running_loop()
    give_up_at = loop.time() + timeout_s
    while not await check():
        assert loop.time() < give_up_at, f"timed out: {left()}"
        await between()


@contextlib.asynccontextmanager
async def watching(settings: Settings, names: tuple[str, ...]) -> AsyncIterator[list[Any]]:
    """Every committed record of the `names` topics, kept as it is written (compaction aside)."""
    consumer = AIOKafkaConsumer(
        *(settings.topic(name) for name in names),
        bootstrap_servers=settings.kafka_bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
        isolation_level="read_committed",
    )
    seen: list[Any] = []

    async def follow() -> None:
        async for record in consumer:
            seen.append(record)

    await consumer.start()
    task = asyncio.create_task(follow())
    try:
        yield seen
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await consumer.stop()


def table_state(worker: Worker) -> dict[bytes, bytes]:
    """The global table's contents (cache entries, artifact references), its read offsets and the
    workers' announcements (which worker is alive right now, not folded state) aside."""
    assert worker.table is not None
    kept = worker.table._store.scan(b"", b"\xff")
    return {key: value for key, value in kept if not key.startswith((OFFSET, EXECUTOR))}


def ledger_state(worker: Worker) -> dict[str, Any]:
    assert worker.ledger is not None
    now = utc_now()
    return {  # when each was written is not what is compared
        name: msgspec.structs.replace(kept.checkpoint(name, 0, now), written_at=EPOCH)  # type: ignore[type-var]
        for name, kept in worker.ledger.ledgers.items()
    }


async def test_compaction_removes_older_values_and_a_fresh_worker_rebuilds_the_same_state(
    kafka_cluster, origin, tmp_path, monkeypatch
):
    monkeypatch.setattr(ledger, "CHECKPOINT_AFTER_RECORDS", 3)
    settings = cluster_settings(
        kafka_cluster,
        tmp_path / "live",
        compacted_segment_ms=1_000,
        compacted_dirty_ratio=0.01,
        snapshot_interval_s=0.5,
        routes=METERED,
    )
    async with running_system(settings) as system, watching(settings, COMPACTED) as seen:
        live = system.worker
        assert live is not None
        first = await wave(system, origin, "compact", 12)
        again = await wave(system, origin, "compact", 6, cache_mode=CacheMode.BYPASS)  # the same requests
        await delete_history(live, first[:4])
        cut: dict[str, dict[int, int]] = {}
        written: dict[str, Counter[bytes]] = {}

        async def repeated() -> bool:
            # Counted as they were written: the cleaner may remove older values before any later look.
            cut.update({name: await ends(settings, name) for name in COMPACTED})
            written.update(
                {
                    name: Counter(
                        record.key
                        for record in seen
                        if record.topic == settings.topic(name)
                        and record.offset < cut[name].get(record.partition, 0)
                    )
                    for name in COMPACTED
                }
            )
            return all(max(written[name].values(), default=0) > 1 for name in COMPACTED)

        more_waves = iter(range(1_000))

        async def more() -> None:  # a route's checkpoint is written again only as more records come
            await asyncio.sleep(0.5)
            await wave(system, origin, f"more-{next(more_waves)}", 2)

        def once_only() -> str:
            once = [name for name in COMPACTED if max(written[name].values(), default=0) < 2]
            return f"no key written twice in {once}"

        await until_true(repeated, 120, more, once_only)
        rolls = iter(range(1_000))

        uncompacted: list[str] = list(COMPACTED)
        seen: dict[str, Counter[bytes]] = {}

        async def compacted() -> bool:
            seen.update({name: await per_key(settings, name, cut[name]) for name in COMPACTED})
            uncompacted[:] = [
                name
                for name in COMPACTED
                if not any(seen[name][key] < count for key, count in written[name].items() if count > 1)
            ]
            return not uncompacted

        def not_compacted() -> str:
            repeated = {
                name: {key: (count, seen[name][key]) for key, count in written[name].items() if count > 1}
                for name in uncompacted
            }
            return f"not compacted yet: {uncompacted}; repeated keys (written, now): {repeated}"

        async def traffic() -> None:
            await asyncio.sleep(1.2)  # past segment.ms: the next record of each partition rolls it
            await wave(system, origin, f"roll-{next(rolls)}", 4)

        # The log cleaner runs every half second, but on two busy cores it can take minutes.
        await until_true(compacted, 240, traffic, not_compacted)
        # Retention on the route ledger too: its oldest reservations go, its checkpoints stand for them.
        await retain_briefly(settings, "routes")

        async def trimmed() -> bool:
            assert live.ledger is not None
            return (await starts(settings, "routes"))[live.ledger.partition_for("direct")] > 0

        await until_true(trimmed, 120, traffic)
        await retain_briefly(settings, "routes", restore=True)
        jobs = first + again
        views = await finished(live, jobs)
        table, budgets = table_state(live), ledger_state(live)
        await live.stop()
        system.worker = None

    async with reader(settings, tmp_path / "fresh") as fresh:
        await settled_ownership(fresh, partitions=PARTITIONS)
        assert fresh.table is not None
        for _ in range(300):
            if fresh.table.caught_up():
                break
            await asyncio.sleep(0.1)
        assert await finished(fresh, jobs) == views
        assert table_state(fresh) == table
        # Retention removed this period's oldest reservations: only the checkpoint standing for
        # them gives the same budgets.
        assert ledger_state(fresh) == budgets


async def retain_briefly(settings: Settings, topic: str, restore: bool = False) -> None:
    """Short segments and retention on a topic (as an operator might set them), or its configs as
    the settings have them again."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        # AlterConfigs replaces a topic's whole set: the settings' own configs go along.
        (spec,) = [spec for spec in topic_specs(settings) if spec.name == settings.topic(topic)]
        brief = {"segment.ms": "500", "retention.ms": str(int(RETAINED_S * 1000))}
        # Compaction merges new records into the oldest segment, which would then never be old
        # enough to delete: from here on the cleaner leaves recent records alone.
        if "compact" in spec.configs["cleanup.policy"]:
            brief["min.compaction.lag.ms"] = "600000"
        configs = spec.configs if restore else spec.configs | brief
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, spec.name, configs)])
    finally:
        await admin.close()


async def starts(settings: Settings, topic: str) -> dict[int, int]:
    """Where each partition of a topic begins now (above 0 once retention removed a segment)."""
    found = {}
    for partition in range(PARTITIONS):
        tp = TopicPartition(settings.topic(topic), partition)
        end = (await end_offsets(settings.kafka_access, [tp], KAFKA))[tp]
        found[partition] = end
        async for records in records_between(settings.kafka_access, tp, None, end):
            found[partition] = records[0].offset
            break
    return found


async def accepted_on_the_log(settings: Settings) -> set[UUID]:
    """The jobs whose `JobAccepted` the events topic still holds."""
    records = await read_topic(settings.kafka_bootstrap, settings.topic("events"), PARTITIONS)
    return {
        event.job_id
        for event in map(decode, (record.value for record in records))
        if isinstance(event, JobAccepted)
    }


async def retention_run(
    kafka_cluster: KafkaCluster, origin: Origin, data_dir: Path, snapshot_interval_s: float
):
    """A worker finishes jobs while retention removes the oldest events; returns its settings, the
    jobs and its answers for them."""
    settings = cluster_settings(
        kafka_cluster,
        data_dir,
        snapshot_interval_s=snapshot_interval_s,
        events_retention_hours=RETAINED_S / 3_600,
    )
    async with running_system(settings) as system:
        live = system.worker
        assert live is not None
        await retain_briefly(settings, "events")
        jobs = await wave(system, origin, f"retain-{data_dir.name}", 12)
        waves = iter(range(1_000))

        async def trimmed() -> bool:
            return all(start > 0 for start in (await starts(settings, "events")).values())

        async def traffic() -> None:
            await asyncio.sleep(1.0)
            jobs.extend(await wave(system, origin, f"later-{data_dir.name}-{next(waves)}", 2))

        await until_true(trimmed, 120, traffic)
        views = await finished(live, jobs)
        await live.stop()
        system.worker = None
    return settings, jobs, views


async def test_retention_removes_old_events_and_a_fresh_worker_answers_every_job_from_the_snapshots(
    kafka_cluster, origin, tmp_path
):
    settings, jobs, views = await retention_run(
        kafka_cluster, origin, tmp_path / "live", snapshot_interval_s=0.5
    )
    async with reader(settings, tmp_path / "fresh") as fresh:
        await settled_ownership(fresh, partitions=PARTITIONS)
        assert await finished(fresh, jobs) == views


async def test_events_gone_with_no_snapshot_covering_them_leave_the_partition_unserved_and_say_why(
    kafka_cluster, origin, tmp_path
):
    settings, jobs, _ = await retention_run(
        kafka_cluster, origin, tmp_path / "live", snapshot_interval_s=3_600
    )
    async with (
        reader(settings, tmp_path / "fresh") as fresh,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{fresh.web_port}") as http,
    ):
        for _ in range(300):
            ready = await http.get("/readyz")
            reasons = ready.json()["reasons"]
            if len([reason for reason in reasons if "is not served" in reason]) == PARTITIONS:
                break
            await asyncio.sleep(0.1)
        assert ready.status_code == 503
        for partition in range(PARTITIONS):
            (reason,) = [r for r in reasons if r.startswith(f"partition {partition} is not served")]
            assert f"{settings.topic('events')} partition {partition} starts at offset" in reason
            assert "No snapshot covers them" in reason
            assert f"SCRAPESTREAM_ACCEPT_LOG_GAP=[{partition}]" in reason
        answer = await http.get(f"/jobs/{jobs[0]}")
        assert answer.status_code == 503
        assert "is not served" in answer.json()["message"]
    # Told to accept the loss, the worker serves what the log still holds and forgets the rest.
    async with reader(settings, tmp_path / "accepting", accept_log_gap=tuple(range(PARTITIONS))) as accepting:
        await settled_ownership(accepting, partitions=PARTITIONS)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{accepting.web_port}") as http:
            assert (await http.get("/readyz")).status_code == 200
            assert (await http.get(f"/jobs/{jobs[0]}")).status_code == 404  # its events are gone
            # Retention goes on meanwhile: what the log holds now, it held when the worker folded it.
            for job_id in await accepted_on_the_log(settings) & set(jobs):
                answer = await http.get(f"/jobs/{job_id}")
                assert answer.json().get("state") == "SUCCEEDED", answer.text
