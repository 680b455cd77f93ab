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
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable
from uuid import UUID

from aiokafka import TopicPartition

from projections.jobstore import JobStore, SnapshotCut
from schemas.codec import decode_as
from schemas.errors import CodecError, ScrapestreamError
from schemas.work import JobSnapshot, SnapshotMark
from streams.broker.compat import BrokerProfile, end_offsets, records_between
from streams.periodic import every
from streams.publisher import MAX_BATCH_BYTES, Sink, outgoing, tombstone
from streams.settings import Settings

log = logging.getLogger(__name__)
JOBS_PER_CUT = 20_000


PURGED = b"purged/"


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
        messages = []
        too_large = []
        for job_id, events in cut.jobs.items():
            snapshot = JobSnapshot(job_id=job_id, events_offset=cut.events_offset, events=tuple(events))
            key = PURGED + str(job_id).encode() if job_id in cut.purged else str(job_id).encode()
            message = outgoing(self._topic, key, snapshot, partition=cut.partition)
            if len(message.value) > MAX_BATCH_BYTES - 1024:
                too_large.append(job_id)
                continue
            if job_id in cut.purged:
                messages.append(tombstone(self._topic, str(job_id).encode(), cut.partition))
            messages.append(message)
        await self._publisher.send_all(messages)
        if too_large:
            # Without a mark, recovery starts at the previous one: slower, never wrong.
            log.error("partition %d: too large to snapshot, so no mark: %s", cut.partition, too_large)
        elif cut.complete:
            mark = SnapshotMark(partition=cut.partition, events_offset=cut.events_offset)
            await self._publisher.send_all(
                [outgoing(self._topic, mark_key(cut.partition), mark, partition=cut.partition)]
            )
        self._store.snapshotted(cut)
        written = sum(1 for message in messages if not message.tombstone)
        self._counters["snapshots.written"] += written
        return written

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
        except (UnusableSnapshotError, CodecError) as exc:
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
        """The latest snapshot of each job of the partition, and its latest mark."""
        source = TopicPartition(self._topic, partition)
        end = (await end_offsets(self._settings.kafka_bootstrap, [source], self._profile))[source]
        latest: dict[UUID, tuple[bytes, ...]] = {}
        mark: SnapshotMark | None = None
        reading = records_between(self._settings.kafka_bootstrap, source, None, end)
        async with contextlib.aclosing(reading):  # a refused record stops the reader now, not at GC
            async for records in reading:
                for record in records:
                    if record.value is None:
                        latest.pop(_job_of(record.key), None)  # a purged job's: its marker follows
                        continue
                    try:
                        found = decode_as(record.value, JobSnapshot, SnapshotMark)
                    except CodecError as exc:
                        raise UnusableSnapshotError(
                            f"the record at offset {record.offset} does not decode: {exc}"
                        ) from exc
                    if isinstance(found, JobSnapshot):
                        latest[found.job_id] = found.events
                    elif isinstance(found, SnapshotMark) and found.partition == partition:
                        mark = found
        return latest, mark


class UnusableSnapshotError(ScrapestreamError):
    """A snapshot record that cannot be restored: skipping it would lose its job, so none is used."""


def _job_of(key: bytes | None) -> UUID:
    try:
        return UUID((key or b"").decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise UnusableSnapshotError(f"a tombstone names no job: {(key or b'')[:64]!r}") from exc
