"""The snapshot topic: each job's latest state, so a fresh worker need not read the log from its start.

Every `SCRAPESTREAM_SNAPSHOT_INTERVAL_S` the worker takes a cut of each partition it owns: the jobs
changed since their last snapshot, as its store holds them at the partition's events offset X. It
writes one `JobSnapshot` per job (keyed by job id, in the job's partition of the compacted
`scrapestream.snapshots`) and, once those are acknowledged and the cut held every changed job, a
`SnapshotMark` with X. A worker that adopts a partition its store never folded reads the partition
of the snapshot topic, restores the latest snapshot of each job and folds the events from the
latest mark on: every job changed before the mark has a snapshot at or after it, so no older event
is needed, and events the log no longer keeps (time retention) are never asked for.

A job whose history is purged gets a tombstone under its id, so compaction removes its snapshot;
what the store keeps of it (audit records and the deletion, which dedupe its commands and number
its events) is written under `purged/<job id>`. Recovery takes the latest record of either key.

No job is too large to snapshot: one whose events exceed `PART_BYTES` is written in parts, each
under its own key (`parts/<job id>/<events offset>/<part>`), before the last part under the job's
key names how many there are; the parts of an earlier cut are tombstoned once the new one is in.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable
from typing import cast
from uuid import UUID

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from projections.jobstore import JobStore, SnapshotCut
from projections.storage.base import StoreError
from schemas.codec import decode_as
from schemas.errors import CodecError, ScrapestreamError
from schemas.work import JobSnapshot, SnapshotMark
from streams.broker.compat import MAX_BATCH_BYTES, BrokerProfile, end_offsets, records_between
from streams.errors import BrokerError
from streams.runtime.periodic import every
from streams.runtime.publisher import Outgoing, Sink, outgoing, tombstone
from streams.settings import Settings

log = logging.getLogger(__name__)
JOBS_PER_CUT = 20_000
PART_BYTES = 512 * 1024  # events per snapshot record, well under the broker's record limit


PURGED = b"purged/"
PARTS = b"parts/"


def mark_key(partition: int) -> bytes:
    return f"mark/{partition}".encode()


class Snapshots:
    def __init__(
        self,
        settings: Settings,
        profile: BrokerProfile,
        store: JobStore,
        publisher: Sink,
        owned: Callable[[], list[int]],
        counters: Counter[str],
    ) -> None:
        self._settings = settings
        self._profile = profile
        self._store = store
        self._publisher = publisher
        self._owned = owned
        self._counters = counters
        self._topic = settings.topic("snapshots")

    async def run(self) -> None:
        # A failed round leaves the change marks: the next one writes those jobs again.
        await every(self._settings.snapshot_interval_s, self.write_round, "a snapshot round")

    async def write_round(self) -> int:
        """Snapshots every changed job of the owned partitions; returns how many were written."""
        written = 0
        for partition in self._owned():
            written += await self._write(self._store.snapshot_cut(partition, JOBS_PER_CUT))
        return written

    async def _write(self, cut: SnapshotCut) -> int:
        if not cut.jobs:
            return 0
        messages: list[Outgoing] = []
        parts: dict[UUID, int] = {}
        too_large = []
        for job_id, events in cut.jobs.items():
            records = self._records(cut, job_id, events)
            if any(len(message.value) > MAX_BATCH_BYTES - 1024 for message in records):
                too_large.append(job_id)  # one event over a record's limit: events are bounded below it
                continue
            parts[job_id] = len(split(events, PART_BYTES))
            messages += records
        await self._publisher.send_all(messages)
        await self._publisher.send_all(self._earlier_parts(cut, parts))
        if too_large:
            # Without a mark, recovery starts at the previous one: slower, never wrong.
            log.error("partition %d: too large to snapshot, so no mark: %s", cut.partition, too_large)
        elif cut.complete:
            mark = SnapshotMark(partition=cut.partition, events_offset=cut.events_offset)
            await self._publisher.send_all(
                [outgoing(self._topic, mark_key(cut.partition), mark, partition=cut.partition)]
            )
        self._store.snapshotted(cut, parts)
        written = len(parts)
        self._counters["snapshots.written"] += written
        return written

    def _records(self, cut: SnapshotCut, job_id: UUID, events: list[bytes]) -> list[Outgoing]:
        """The job's snapshot: its parts first, the last part under the job's own key."""
        groups = split(events, PART_BYTES)
        count = len(groups)
        records = [
            outgoing(
                self._topic,
                part_key(job_id, cut.events_offset, part),
                JobSnapshot(
                    job_id=job_id, events_offset=cut.events_offset, events=group, part=part, parts=count
                ),
                partition=cut.partition,
            )
            for part, group in enumerate(groups[:-1])
        ]
        last = JobSnapshot(
            job_id=job_id, events_offset=cut.events_offset, events=groups[-1], part=count - 1, parts=count
        )
        key = str(job_id).encode()
        if job_id in cut.purged:
            records.append(tombstone(self._topic, key, cut.partition))
            key = PURGED + key
        records.append(outgoing(self._topic, key, last, partition=cut.partition))
        return records

    def _earlier_parts(self, cut: SnapshotCut, parts: dict[UUID, int]) -> list[Outgoing]:
        """Tombstones for the parts of each job's earlier snapshot, now that a newer one is written."""
        stale = []
        for job_id in parts:
            earlier = self._store.snapshot_parts(job_id)
            if earlier is not None and earlier[0] != cut.events_offset:
                offset, count = earlier
                stale += [
                    tombstone(self._topic, part_key(job_id, offset, part), cut.partition)
                    for part in range(count - 1)
                ]
        return stale

    async def restore(self, partition: int) -> bool:
        """Fill a partition this store never folded from the snapshot topic; False when it has no mark,
        or holds a record that cannot be used (then the log is folded from its start instead)."""
        if self._store.has_offset(partition):
            return False
        try:
            latest, mark = await self._read(partition)
            if mark is None:
                return False
            self._store.restore(partition, latest, mark.events_offset)
        except (KafkaError, BrokerError, StoreError):
            raise  # the infrastructure's: the catch-up is tried again
        except Exception as exc:  # any record the restore cannot use: fold the log instead
            log.error("partition %d: not restored from snapshots, folding the whole log: %s", partition, exc)
            return False
        self._counters["recovery.snapshots_restored"] += len(latest)
        log.info(
            "partition %d: restored %d jobs from snapshots, the log follows from offset %d",
            partition,
            len(latest),
            mark.events_offset,
        )
        return True

    async def _read(self, partition: int) -> tuple[dict[UUID, tuple[bytes, ...]], SnapshotMark | None]:
        """The latest snapshot of each job of the partition (its parts joined), and its latest mark."""
        source = TopicPartition(self._topic, partition)
        end = (await end_offsets(self._settings.kafka_access, [source], self._profile))[source]
        latest: dict[UUID, JobSnapshot] = {}
        parts: dict[bytes, tuple[bytes, ...]] = {}
        mark: SnapshotMark | None = None
        reading = records_between(
            self._settings.kafka_access, source, None, end, isolation_level=self._profile.isolation_level
        )
        async with contextlib.aclosing(reading):  # a refused record stops the reader now, not at GC
            async for records in reading:
                for record in records:
                    key = record.key or b""
                    if key.startswith(PARTS):
                        _keep_part(parts, key, record.value, record.offset)
                    elif record.value is None:
                        latest.pop(_job_of(key), None)  # a purged job's: its marker follows
                    else:
                        found = _decoded(record.value, record.offset)
                        if isinstance(found, JobSnapshot):
                            latest[found.job_id] = found
                        elif isinstance(found, SnapshotMark) and found.partition == partition:
                            mark = found
        return {job_id: _joined(snapshot, parts) for job_id, snapshot in latest.items()}, mark


def split(events: list[bytes], part_bytes: int) -> list[tuple[bytes, ...]]:
    """`events` in consecutive groups of at most `part_bytes` (one event at least); one group at least."""
    groups: list[tuple[bytes, ...]] = []
    group: list[bytes] = []
    size = 0
    for event in events:
        if group and size + len(event) > part_bytes:
            groups.append(tuple(group))
            group, size = [], 0
        group.append(event)
        size += len(event)
    groups.append(tuple(group))
    return groups


def part_key(job_id: UUID, events_offset: int, part: int) -> bytes:
    return PARTS + f"{job_id}/{events_offset}/{part}".encode()


def _keep_part(parts: dict[bytes, tuple[bytes, ...]], key: bytes, value: bytes | None, offset: int) -> None:
    if value is None:
        parts.pop(key, None)
        return
    found = _decoded(value, offset)
    if not isinstance(found, JobSnapshot):
        raise UnusableSnapshotError(f"the record at offset {offset} is not a snapshot part")
    parts[key] = found.events


def _joined(snapshot: JobSnapshot, parts: dict[bytes, tuple[bytes, ...]]) -> tuple[bytes, ...]:
    """The job's events: every earlier part of its cut, then the last one."""
    events: list[bytes] = []
    for part in range(snapshot.parts - 1):
        found = parts.get(part_key(snapshot.job_id, snapshot.events_offset, part))
        if found is None:
            raise UnusableSnapshotError(
                f"part {part} of {snapshot.parts} of job {snapshot.job_id}'s snapshot is missing"
            )
        events += found
    return (*events, *snapshot.events)


def _decoded(value: bytes, offset: int) -> JobSnapshot | SnapshotMark:
    try:
        found = decode_as(value, JobSnapshot, SnapshotMark)
    except CodecError as exc:
        raise UnusableSnapshotError(f"the record at offset {offset} does not decode: {exc}") from exc
    return cast(JobSnapshot | SnapshotMark, found)


class UnusableSnapshotError(ScrapestreamError):
    """A snapshot record that cannot be restored: skipping it would lose its job, so none is used."""


def _job_of(key: bytes | None) -> UUID:
    try:
        return UUID((key or b"").decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise UnusableSnapshotError(f"a tombstone names no job: {(key or b'')[:64]!r}") from exc
