"""A worker on an empty data directory recovers from the snapshot topic plus the events after it."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from schemas.codec import decode
from schemas.enums import CacheMode
from schemas.work import SnapshotMark
from streams.worker import Worker
from tests.e2e.conftest import running_system, settled_ownership, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")
PARTITIONS = 2


async def read_all(bootstrap: str, topic: str) -> list[Any]:
    """Every record of `topic`, from its start to its current end."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        seen: list[Any] = []
        while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                seen += records
        return seen
    finally:
        await consumer.stop()


async def job_views(worker: Worker, job_ids: list[UUID], settled: bool = True) -> dict[UUID, Any]:
    """Each job as `GET /jobs/{id}` answers, once every one of them has finished (when `settled`)."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
        for _ in range(300):
            views = {job_id: await http.get(f"/jobs/{job_id}") for job_id in job_ids}
            done = all(v.status_code == 200 and v.json()["state"] == "SUCCEEDED" for v in views.values())
            if done or not settled:
                return {job_id: view.json() for job_id, view in views.items()}
            await asyncio.sleep(0.1)
    raise AssertionError("the jobs never all finished")


async def health(worker: Worker) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        answer = await http.get(f"http://127.0.0.1:{worker.web_port}/healthz")
    counters: dict[str, Any] = answer.json()["counters"]
    return counters


async def test_an_empty_worker_recovers_from_snapshots_and_reads_only_later_events(broker, origin, tmp_path):
    settings = worker_settings(
        broker.bootstrap, tmp_path / "live", partitions=PARTITIONS, snapshot_interval_s=3_600.0
    )
    async with running_system(settings) as system:
        live = system.worker
        assert live is not None
        assert live.snapshots is not None
        before = [await system.submit(origin.url(f"/page/snap-{n}")) for n in range(12)]
        await job_views(live, before)
        snapshotted = await live.snapshots.write_round()
        assert snapshotted == len(before)
        after = [
            await system.submit(origin.url(f"/page/snap-late-{n}"), cache_mode=CacheMode.BYPASS)
            for n in range(6)
        ]
        jobs = before + after
        expected = await job_views(live, jobs)
        await live.stop()
        system.worker = None

    marks = {
        record.partition: decode(record.value).events_offset
        for record in await read_all(broker.bootstrap, settings.topic("snapshots"))
        if record.key.startswith(b"mark/")
    }
    assert sorted(marks) == list(range(PARTITIONS))
    events = await read_all(broker.bootstrap, settings.topic("events"))
    later = [record for record in events if record.offset >= marks[record.partition]]
    assert 0 < len(later) < len(events)
    assert {UUID(record.key.decode()) for record in later} == set(after)

    fresh = Worker(settings.model_copy(update={"data_dir": tmp_path / "fresh", "executor_concurrency": 0}))
    await fresh.start()
    try:
        await settled_ownership(fresh, partitions=PARTITIONS)
        counters = await health(fresh)
        assert counters["recovery.snapshots_restored"] == len(before)
        # Only the events after each partition's mark were read, and none was already in a snapshot.
        assert counters["fold.events_from_log"] == len(later)
        assert counters["fold.duplicates_ignored"] == 0
        recovered = await job_views(fresh, jobs, settled=False)
        for job_id in jobs:
            differing = {
                k: (v, recovered[job_id].get(k))
                for k, v in expected[job_id].items()
                if recovered[job_id].get(k) != v
            }
            assert not differing, repr(differing)[:3000]
        assert recovered == expected
    finally:
        await fresh.stop()


async def test_a_mark_is_written_only_after_every_changed_job_of_its_cut(broker, origin, tmp_path):
    settings = worker_settings(broker.bootstrap, tmp_path, partitions=PARTITIONS, snapshot_interval_s=3_600.0)
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        assert worker.snapshots is not None
        jobs = [await system.submit(origin.url(f"/page/marked-{n}")) for n in range(4)]
        await job_views(worker, jobs)
        assert await worker.snapshots.write_round() == len(jobs)
        assert await worker.snapshots.write_round() == 0  # nothing changed since
        records = await read_all(broker.bootstrap, settings.topic("snapshots"))
        kinds = [type(decode(record.value)).__name__ for record in records]
        assert kinds.count("JobSnapshot") == len(jobs)
        for record in records:
            if isinstance(decode(record.value), SnapshotMark):
                same_partition = [r for r in records if r.partition == record.partition and r is not record]
                assert all(r.offset < record.offset for r in same_partition)
