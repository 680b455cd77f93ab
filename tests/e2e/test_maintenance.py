"""Maintenance against a real broker and a real S3 server: what outlived its retention goes, nothing else."""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import httpx
import pytest

from projections.artifacts import Pointers, reference_key
from projections.lifecycle.identity import audit_stream_id
from projections.storage.rocks import RocksStore
from schemas.codec import decode
from schemas.enums import ActorRole, AuditAction, CacheMode, JobStatus, RetentionClass
from schemas.events import JobAccepted, JobHistoryDeleted
from schemas.types import to_utc_millis
from schemas.work import ArtifactPurged, CacheEntry
from streams.agents.maintenance import ACTOR, Swept
from streams.artifacts.configured import open_artifact_store
from streams.clock import utc_now
from streams.readers.global_table import GlobalTable
from streams.runtime.publisher import outgoing
from streams.worker import Worker
from tests.e2e.conftest import System, read_topic, running_system, worker_settings
from tests.lifecycle import audit_command

pytestmark = pytest.mark.asyncio(loop_scope="module")
TRANSIENT = RetentionClass.TRANSIENT_24H
QUIET = {"maintenance_interval_s": 3_600.0}  # rounds run only when a test asks


async def finished(system: System, *job_ids: UUID) -> list[Any]:
    completions = [await system.completion(job_id) for job_id in job_ids]
    assert all(completion.status is JobStatus.SUCCEEDED for completion in completions)
    return completions


async def transient_artifact(system: System, url: str, **options: Any) -> Path:
    """Where the artifact of a finished job kept a day, fetched past the cache, is stored."""
    job = await system.submit(url, retention_class=TRANSIENT, cache_mode=CacheMode.BYPASS, **options)
    (done,) = await finished(system, job)
    assert system.worker is not None
    return system.worker.settings.data_dir / "artifacts" / done.artifacts[0].key


async def request_hash_of(system: System, job_id: UUID) -> str:
    accepted = await first_event(system, job_id, JobAccepted)
    return str(accepted.request_hash)


async def first_event(system: System, job_id: UUID, kind: type[Any]) -> Any:
    def seen(_: object) -> bool:
        return any(isinstance(event, kind) for event in system.events.of_job(job_id))

    await system.events.wait_for(seen)
    return next(event for event in system.events.of_job(job_id) if isinstance(event, kind))


async def table_reads(worker: Worker, request_hash: str, present: bool) -> None:
    assert worker.table is not None
    for _ in range(200):
        if (worker.table.get(request_hash) is not None) is present:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the cache table never {'held' if present else 'dropped'} {request_hash}")


async def test_maintenance_expires_artifacts_and_cache_entries_but_keeps_what_is_referenced(
    broker, origin, s3, tmp_path
):
    bucket = f"maint-{uuid4().hex[:12]}"
    settings = worker_settings(
        broker.bootstrap, tmp_path, history_retention_days=0, **QUIET, **s3.settings(bucket)
    )
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        assert worker.maintenance is not None
        assert worker.table is not None
        day = await system.submit(origin.url("/page/maint-day"), retention_class=TRANSIENT)
        week = await system.submit(origin.url("/page/maint-week"), retention_class=RetentionClass.CACHE_7D)
        pinned = await system.submit(
            origin.url("/page/maint-pinned"), retention_class=RetentionClass.REFERENCED_ARCHIVE
        )
        held = await system.submit(
            origin.url("/page/maint-held"), retention_class=RetentionClass.TRANSIENT_24H
        )
        day_done, week_done, pinned_done, held_done = await finished(system, day, week, pinned, held)
        hashes = {job: await request_hash_of(system, job) for job in (day, week, held)}
        for request_hash in hashes.values():
            await table_reads(worker, request_hash, present=True)
        # An entry still valid in 30 days points at the held page's object: it must outlive its own expiry.
        now = utc_now()
        (held_artifact,) = held_done.artifacts
        holder = CacheEntry(
            request_hash=hashes[held],
            http_status=200,
            artifacts=(held_artifact,),
            stored_at=to_utc_millis(now),
            expires_at=to_utc_millis(now + timedelta(days=30)),
            job_id=held,
        )
        await worker_publish(worker, outgoing(settings.topic("cache"), hashes[held], holder))
        in_two_days = now + timedelta(days=2)
        await wait_until(lambda: worker.table.pointers(held_artifact.key, in_two_days) is Pointers.LIVE)

        swept = await worker.maintenance.run_once(in_two_days)
        assert swept.artifacts == 1
        keys = {item["Key"] for item in s3.client().list_objects_v2(Bucket=bucket)["Contents"]}
        assert keys == {f"artifacts/{done.artifacts[0].key}" for done in (week_done, pinned_done, held_done)}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
            gone = await http.get(f"/artifacts/{day_done.artifacts[0].artifact_id}")
            assert gone.status_code == 404
            assert gone.json()["code"] == "gone"
            kept = await http.get(f"/artifacts/{pinned_done.artifacts[0].artifact_id}")
            assert kept.status_code == 200
        # The day-old entry expired with its artifact: a tombstone on the topic, and gone from the table.
        assert swept.cache_entries == 1
        await table_reads(worker, hashes[day], present=False)
        cache_topic = await read_topic(broker.bootstrap, settings.topic("cache"), settings.partitions)
        assert (hashes[day].encode(), None) in [(record.key, record.value) for record in cache_topic]

        later = await worker.maintenance.run_once(now + timedelta(days=40))
        assert later.artifacts == 2  # the week's page and the held one, once nothing points at it
        assert later.cache_entries == 3  # the week's, the holder and the pinned page's (seven days at most)
        (left,) = s3.client().list_objects_v2(Bucket=bucket)["Contents"]
        assert left["Key"] == f"artifacts/{pinned_done.artifacts[0].key}"
        async with httpx.AsyncClient() as http:
            metrics = (await http.get(f"http://127.0.0.1:{worker.web_port}/metrics")).text
        assert 'scrapestream_maintenance_purged{kind="artifacts"} 3.0' in metrics
        assert 'scrapestream_maintenance_purged{kind="cache_entries"} 4.0' in metrics


async def test_a_renewed_object_survives_the_round_that_listed_it_expired(origin, broker, tmp_path):
    settings = worker_settings(broker.bootstrap, tmp_path, history_retention_days=0, **QUIET)
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        assert worker.maintenance is not None
        path = await transient_artifact(system, origin.url("/page/renewed"))
        # Written 20 hours ago, as far as the store can tell; the same bytes stored now renew it.
        now = utc_now()
        aged = (now - timedelta(hours=20)).timestamp()
        os.utime(path, (aged, aged))
        # Another caller's job, not a resubmission of the first.
        await transient_artifact(system, origin.url("/page/renewed"), caller_identity="svc-b")
        assert path.stat().st_mtime >= (now - timedelta(minutes=1)).timestamp()
        assert (await worker.maintenance.run_once(now + timedelta(hours=5))).artifacts == 0
        assert path.exists()
        assert (await worker.maintenance.run_once(now + timedelta(hours=25))).artifacts == 1
        assert not path.exists()


async def test_a_local_store_is_swept_by_its_workers_first_process_only(origin, broker, tmp_path):
    # A worker's processes share its artifact directory; each would sweep it.
    settings = worker_settings(broker.bootstrap, tmp_path, history_retention_days=0, **QUIET)
    async with running_system(settings, process_index=1) as system:
        worker = system.worker
        assert worker is not None
        assert worker.maintenance is not None
        path = await transient_artifact(system, origin.url("/page/second-process"))
        assert worker.table is not None
        await wait_until(worker.table.caught_up)  # a table still reading would spare it too
        assert (await worker.maintenance.run_once(utc_now() + timedelta(hours=25))).artifacts == 0
        assert path.exists()


async def test_histories_past_retention_are_purged_through_the_lifecycle(broker, origin, tmp_path):
    settings = worker_settings(broker.bootstrap, tmp_path, history_retention_days=1, **QUIET)
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        assert worker.maintenance is not None
        jobs = [await system.submit(origin.url(f"/page/purged-{n}")) for n in range(3)]
        await finished(system, *jobs)
        now = utc_now()
        assert (await worker.maintenance.run_once(now + timedelta(hours=12))).histories == 0
        total = Swept()
        for _ in range(50):  # completions are announced just before the lifecycle folds them
            swept = await worker.maintenance.run_once(now + timedelta(days=2))
            total = Swept(histories=total.histories + swept.histories)
            if total.histories == len(jobs):
                break
            await asyncio.sleep(0.1)
        assert total.histories == len(jobs)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
            for job_id in jobs:
                assert (await http.get(f"/jobs/{job_id}")).status_code == 404
            metrics = (await http.get("/metrics")).text
        assert 'scrapestream_maintenance_purged{kind="histories"} 3.0' in metrics
        for job_id in jobs:
            deleted = await first_event(system, job_id, JobHistoryDeleted)
            assert deleted.actor_id == ACTOR
        # Nothing is left to purge, and a second round sends nothing.
        assert (await worker.maintenance.run_once(now + timedelta(days=2))).histories == 0


async def test_audit_records_past_their_retention_are_purged_and_the_recent_ones_stay(
    broker, origin, tmp_path
):
    settings = worker_settings(broker.bootstrap, tmp_path, audit_retention_days=1, **QUIET)
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        assert worker.maintenance is not None
        (job,) = [await system.submit(origin.url("/page/audited"))]
        (completion,) = await finished(system, job)
        old = utc_now() - timedelta(days=3)
        for hours in range(3):  # downloads three days ago: a reader's audit streams of those hours
            at = old + timedelta(hours=hours)
            await worker_publish(worker, old_download(settings.topic("commands"), at, completion))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
            download = await http.get(f"/artifacts/{completion.artifacts[0].artifact_id}")
            assert download.status_code == 200

            async def audited() -> dict[str, str]:
                return {
                    item["audit_id"]: item["actor_id"] for item in (await http.get("/audit")).json()["items"]
                }

            for _ in range(100):  # the job's creation, the three old downloads and the new one
                if len(await audited()) >= 5:
                    break
                await asyncio.sleep(0.1)
            assert sorted((await audited()).values()).count("old-reader") == 3
            purged = 0
            for _ in range(100):
                purged += (await worker.maintenance.run_once(utc_now())).audit_histories
                if "old-reader" not in (await audited()).values():
                    break
                await asyncio.sleep(0.1)
            left = await audited()
            assert "old-reader" not in left.values()
            assert download.headers["x-audit-id"] in left  # recent records stay
            assert len(left) == 2
            assert purged == 3  # the three old streams, nothing recent
            (creation,) = [
                item for item in (await http.get("/audit")).json()["items"] if item["action"] == "JOB_CREATE"
            ]
            assert creation["job_id"] == str(job)  # its acceptance, kept with the job, is its audit record
            assert (await worker.maintenance.run_once(utc_now())).audit_histories == 0


def old_download(topic: str, at: Any, completion: Any) -> Any:
    stream = audit_stream_id("old-reader", at)
    target = f"artifact:{completion.artifacts[0].artifact_id}"
    download = AuditAction.ARTIFACT_DOWNLOAD
    command = audit_command(stream, download, actor="old-reader", role=ActorRole.VIEWER, target=target)
    return outgoing(topic, stream, command, at=at)


async def test_an_archived_artifact_stays_while_its_job_lasts_and_orphans_go_after_the_grace(
    broker, origin, tmp_path
):
    settings = worker_settings(broker.bootstrap, tmp_path, history_retention_days=1, **QUIET)
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        assert worker.maintenance is not None
        assert worker.table is not None
        job = await system.submit(
            origin.url("/page/archived-orphan"), retention_class=RetentionClass.REFERENCED_ARCHIVE
        )
        (done,) = await finished(system, job)
        (artifact,) = done.artifacts
        now = utc_now()
        store = await open_artifact_store(settings)
        try:
            stray = await store.put(b"nothing points here", "text/plain", RetentionClass.CACHE_7D, now)
        finally:
            await store.close()
        root = settings.data_dir / "artifacts"
        a_year_on = now + timedelta(days=365)
        # The job's own reference, not only its cache entry (which its worker's table holds first).
        await wait_until(lambda: worker.table.pointers(artifact.key, a_year_on) is Pointers.LIVE)
        assert worker.table.pointers(stray.key, now) is Pointers.NONE

        # Within the grace an unreferenced object stays: its reference may still be on the way.
        assert (await worker.maintenance.run_once(now + timedelta(hours=1))).artifacts == 0
        assert (root / stray.key).exists()
        # A year on, the archived page stays while its job's history does; the orphan goes.
        purged = Swept()
        for _ in range(50):
            swept = await worker.maintenance.run_once(a_year_on)
            purged = Swept(
                artifacts=purged.artifacts + swept.artifacts, histories=purged.histories + swept.histories
            )
            if purged.histories:
                break
            await asyncio.sleep(0.1)
        assert purged == Swept(artifacts=1, histories=1)
        assert not (root / stray.key).exists()
        assert (root / artifact.key).exists()
        # The purge released the job's reference: nothing live points at the page any more.
        await wait_until(lambda: worker.table.pointers(artifact.key, a_year_on) is not Pointers.LIVE)
        assert (await worker.maintenance.run_once(a_year_on)).artifacts == 1
        assert not (root / artifact.key).exists()

        records = await read_topic(broker.bootstrap, settings.topic("references"), settings.partitions)
        reference = reference_key(artifact.key, job)
        assert [record.value is None for record in records if record.key == reference] == [False, True]
        purges = {
            found.artifact_key: found.reason
            for record in records
            if record.value is not None and isinstance(found := decode(record.value), ArtifactPurged)
        }
        assert purges == {stray.key: "orphaned", artifact.key: "orphaned"}


async def test_no_artifact_is_swept_before_the_global_table_has_read_its_topics(broker, origin, tmp_path):
    settings = worker_settings(broker.bootstrap, tmp_path, **QUIET)
    async with running_system(settings) as system:
        job = await system.submit(
            origin.url("/page/archived-late-reader"), retention_class=RetentionClass.REFERENCED_ARCHIVE
        )
        (done,) = await finished(system, job)
        (artifact,) = done.artifacts
        written = await read_topic(broker.bootstrap, settings.topic("references"), settings.partitions)
        assert reference_key(artifact.key, job) in {record.key for record in written}
        # A table on an empty store, as a worker has on a new machine: caught up only once it knows.
        table = GlobalTable(
            settings.kafka_access,
            settings.topic("cache"),
            settings.topic("references"),
            settings.topic("controls"),
            broker.profile,
            RocksStore(tmp_path / "late-table"),
        )
        await table.start()
        try:
            for _ in range(500):
                if table.caught_up():
                    break
                await asyncio.sleep(0.01)
            # The first moment it says so, it knows the job's reference to its archived page.
            assert table.pointers(artifact.key, utc_now() + timedelta(days=365)) is Pointers.LIVE
        finally:
            await table.stop()


async def worker_publish(worker: Worker, message: Any) -> None:
    from streams.runtime.publisher import Publisher

    publisher = Publisher(worker.settings.kafka_access, worker.profile)
    await publisher.start()
    try:
        await publisher.send_all([message])
    finally:
        await publisher.stop()


async def wait_until(condition: Any) -> None:
    for _ in range(200):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the condition never held")


async def test_cache_records_under_keys_no_worker_writes_cost_one_skipped_entry_each(
    broker, origin, tmp_path
):
    settings = worker_settings(broker.bootstrap, tmp_path, history_retention_days=0, **QUIET)
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        assert worker.maintenance is not None
        job_id = await system.submit(origin.url("/page/maint-poison"), retention_class=TRANSIENT)
        await finished(system, job_id)
        request_hash = await request_hash_of(system, job_id)
        await table_reads(worker, request_hash, present=True)
        now = utc_now()
        poisoned = CacheEntry(
            request_hash="x", http_status=200, stored_at=to_utc_millis(now),
            expires_at=to_utc_millis(now + timedelta(seconds=1)), job_id=uuid4(),
        )  # fmt: skip
        topic = settings.topic("cache")
        for key in (b"\xff\xfe not utf-8", b"\xff" + b"f" * 63, "É".encode("latin-1") * 64):
            message = outgoing(topic, "x", poisoned)
            await worker_publish(worker, replace(message, key=key))
        await wait_until(lambda: worker.table is not None and worker.table.skipped == 3)
        swept = await worker.maintenance.run_once(now + timedelta(days=2))
        assert swept.cache_entries == 1  # the real one expired with its day-long artifact
        await table_reads(worker, request_hash, present=False)
        again = await worker.maintenance.run_once(now + timedelta(days=3))  # and every later round runs
        assert again == Swept()
