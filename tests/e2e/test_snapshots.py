"""A worker on an empty data directory recovers from the snapshot topic plus the events after it."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import httpx
import pytest

from projections.lifecycle.submission import submission_identity
from schemas.codec import decode
from schemas.commands import Request, SubmitJob
from schemas.enums import CacheMode
from schemas.work import SnapshotMark
from streams.clock import utc_now
from streams.readers import snapshots
from streams.runtime.publisher import Outgoing, Publisher, partition_of
from streams.settings import Settings
from streams.worker import Worker
from tests.e2e.conftest import read_topic, running_system, settled_ownership, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")
PARTITIONS = 2


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


@dataclass
class LiveRun:
    settings: Settings
    before: list[UUID]  # finished, then snapshotted
    after: list[UUID]  # finished after the snapshot round
    views: dict[UUID, Any]  # every job as the live worker answered it


def spread_urls(origin: Any, path: str, each: int) -> list[str]:
    """Origin URLs under `path` whose jobs fall `each` on every partition (so every one has a mark)."""
    by_partition: dict[int, list[str]] = {partition: [] for partition in range(PARTITIONS)}
    for n in itertools.count():
        url = origin.url(f"{path}-{n}")
        command = SubmitJob(request=Request(url=url), caller_identity="svc-a", deadline_at=utc_now())
        found = by_partition[partition_of(str(submission_identity(command)[0]).encode(), PARTITIONS)]
        if len(found) < each:
            found.append(url)
        if all(len(urls) == each for urls in by_partition.values()):
            return [url for urls in by_partition.values() for url in urls]
    raise AssertionError("unreachable: the URLs never end")


async def live_run(broker: Any, origin: Any, data_dir: Path) -> LiveRun:
    """A worker finishes jobs, snapshots them, finishes more, answers for all of them, and stops."""
    settings = worker_settings(broker.bootstrap, data_dir, partitions=PARTITIONS, snapshot_interval_s=3_600.0)
    async with running_system(settings) as system:
        live = system.worker
        assert live is not None
        assert live.snapshots is not None
        before = [await system.submit(url) for url in spread_urls(origin, f"/page/snap-{data_dir.name}", 6)]
        await job_views(live, before)
        assert await live.snapshots.write_round() == len(before)
        after = [
            await system.submit(origin.url(f"/page/late-{data_dir.name}-{n}"), cache_mode=CacheMode.BYPASS)
            for n in range(6)
        ]
        views = await job_views(live, before + after)
        await live.stop()
        system.worker = None
    return LiveRun(settings, before, after, views)


async def recovering_worker(run: LiveRun, data_dir: Path) -> Worker:
    """A worker on an empty data directory, in the live one's group, that fetches nothing."""
    worker = Worker(run.settings.model_copy(update={"data_dir": data_dir, "executor_concurrency": 0}))
    await worker.start()
    return worker


async def marks_of(run: LiveRun, bootstrap: str) -> dict[int, int]:
    records = await read_topic(bootstrap, run.settings.topic("snapshots"), PARTITIONS)
    return {r.partition: decode(r.value).events_offset for r in records if r.key.startswith(b"mark/")}


async def test_an_empty_worker_recovers_from_snapshots_and_reads_only_later_events(broker, origin, tmp_path):
    run = await live_run(broker, origin, tmp_path / "live")
    marks = await marks_of(run, broker.bootstrap)
    assert sorted(marks) == list(range(PARTITIONS))
    events = await read_topic(broker.bootstrap, run.settings.topic("events"), PARTITIONS)
    later = [record for record in events if record.offset >= marks[record.partition]]
    assert 0 < len(later) < len(events)
    assert {UUID(record.key.decode()) for record in later} == set(run.after)

    fresh = await recovering_worker(run, tmp_path / "fresh")
    try:
        await settled_ownership(fresh, partitions=PARTITIONS)
        counters = await health(fresh)
        assert counters["recovery.snapshots_restored"] == len(run.before)
        # Only the events after each partition's mark were read, and none was already in a snapshot.
        assert counters["fold.events_from_log"] == len(later)
        assert counters["fold.duplicates_ignored"] == 0
        assert await job_views(fresh, list(run.views), settled=False) == run.views
    finally:
        await fresh.stop()


async def test_a_snapshot_that_cannot_be_used_makes_the_worker_fold_that_whole_partition(
    broker, origin, tmp_path
):
    run = await live_run(broker, origin, tmp_path / "live")
    marks = await marks_of(run, broker.bootstrap)
    events = await read_topic(broker.bootstrap, run.settings.topic("events"), PARTITIONS)
    publisher = Publisher(broker.access, broker.profile)
    await publisher.start()
    try:
        garbage = Outgoing(
            run.settings.topic("snapshots"), str(uuid4()).encode(), b"\xc3\x01garbage", partition=0
        )
        await publisher.send_all([garbage])
    finally:
        await publisher.stop()

    fresh = await recovering_worker(run, tmp_path / "fresh")
    try:
        await settled_ownership(fresh, partitions=PARTITIONS)
        counters = await health(fresh)
        # Partition 0 is folded from the log's start; partition 1 still from its mark.
        expected_reads = [r for r in events if r.partition == 0 or r.offset >= marks[r.partition]]
        assert counters["fold.events_from_log"] == len(expected_reads)
        restored = sum(1 for job_id in run.before if partition_of(str(job_id).encode(), PARTITIONS) == 1)
        assert counters["recovery.snapshots_restored"] == restored
        assert await job_views(fresh, list(run.views), settled=False) == run.views
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
        records = await read_topic(broker.bootstrap, settings.topic("snapshots"), PARTITIONS)
        kinds = [type(decode(record.value)).__name__ for record in records]
        assert kinds.count("JobSnapshot") == len(jobs)
        for record in records:
            if isinstance(decode(record.value), SnapshotMark):
                same_partition = [r for r in records if r.partition == record.partition and r is not record]
                assert all(r.offset < record.offset for r in same_partition)


async def test_a_purged_history_is_tombstoned_and_a_fresh_worker_still_knows_it_was_deleted(
    broker, origin, tmp_path
):
    settings = worker_settings(
        broker.bootstrap,
        tmp_path / "live",
        partitions=PARTITIONS,
        snapshot_interval_s=3_600.0,
    )
    async with running_system(settings) as system:
        live = system.worker
        assert live is not None
        assert live.snapshots is not None
        assert live.store is not None
        kept, purged = [await system.submit(origin.url(f"/page/purge-snap-{n}")) for n in range(2)]
        await job_views(live, [kept, purged])
        assert await live.snapshots.write_round() == 2
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{live.web_port}") as http:
            deleted = await http.post(f"/jobs/{purged}/delete-history", json={"reason": "gdpr"})
            assert deleted.status_code == 200, deleted.text
        for _ in range(50):
            if live.store.history_deleted(purged):
                break
            await asyncio.sleep(0.1)
        assert live.store.history_deleted(purged)
        assert not live.store.history_deleted(kept)
        views = await job_views(live, [kept, purged], settled=False)
        assert await live.snapshots.write_round() == 1
        await live.stop()
        system.worker = None

    records = await read_topic(broker.bootstrap, settings.topic("snapshots"), PARTITIONS)
    key = str(purged).encode()
    at_job_key = [record.value is None for record in records if record.key == key]
    assert at_job_key == [False, True]  # its full snapshot, then the tombstone
    (marker,) = [record for record in records if record.key == b"purged/" + key]
    kinds = {type(decode(event)).__name__ for event in decode(marker.value).events}
    assert kinds == {"AuditRecorded", "JobHistoryDeleted"}
    assert [r.value is None for r in records if r.key == str(kept).encode()] == [False]

    fresh = Worker(settings.model_copy(update={"data_dir": tmp_path / "fresh", "executor_concurrency": 0}))
    await fresh.start()
    try:
        await settled_ownership(fresh, partitions=PARTITIONS)
        assert fresh.store is not None
        assert fresh.store.history_deleted(purged)
        assert await job_views(fresh, [kept, purged], settled=False) == views
    finally:
        await fresh.stop()


async def test_a_job_too_large_for_one_record_is_snapshotted_in_parts_and_restored_whole(
    broker, origin, tmp_path, monkeypatch
):
    monkeypatch.setattr(snapshots, "PART_BYTES", 700)  # every job here is larger: all in parts
    run = await live_run(broker, origin, tmp_path / "live")
    records = await read_topic(broker.bootstrap, run.settings.topic("snapshots"), PARTITIONS)
    parts = [record for record in records if record.key.startswith(b"parts/")]
    assert len(parts) >= len(run.before)
    fresh = await recovering_worker(run, tmp_path / "fresh")
    try:
        await settled_ownership(fresh, partitions=PARTITIONS)
        assert (await health(fresh))["recovery.snapshots_restored"] == len(run.before)
        assert await job_views(fresh, list(run.views), settled=False) == run.views
    finally:
        await fresh.stop()


async def test_the_parts_of_an_earlier_snapshot_are_tombstoned_once_a_newer_one_is_written(
    broker, origin, tmp_path, monkeypatch
):
    monkeypatch.setattr(snapshots, "PART_BYTES", 700)
    settings = worker_settings(broker.bootstrap, tmp_path, partitions=PARTITIONS, snapshot_interval_s=3_600.0)
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        assert worker.snapshots is not None
        job = await system.submit(origin.url("/page/parts-renewed"), idempotency_key="parts")
        await job_views(worker, [job])
        await worker.snapshots.write_round()
        await system.submit(origin.url("/page/parts-renewed"), idempotency_key="parts")  # reused: it changed
        for _ in range(50):
            if await worker.snapshots.write_round():
                break
            await asyncio.sleep(0.1)
        records = await read_topic(broker.bootstrap, settings.topic("snapshots"), PARTITIONS)
    by_key: dict[bytes, list[bool]] = {}
    for record in records:
        if record.key.startswith(b"parts/"):
            by_key.setdefault(record.key, []).append(record.value is None)
    offsets = {key.split(b"/")[2] for key in by_key}
    assert len(offsets) == 2  # two cuts of the job
    first, second = sorted(offsets, key=int)
    assert all(by_key[key] == [False, True] for key in by_key if key.split(b"/")[2] == first)
    assert all(by_key[key] == [False] for key in by_key if key.split(b"/")[2] == second)
