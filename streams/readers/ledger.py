"""Every worker's reading of `scrapestream.routes`: each metered route's ledger, folded in log order.

An executor that wants to spend on a route writes a `RouteReserved` (in the route's partition, so
one partition orders all of that route's records) and waits until this reader has folded the
partition past it: the decision is the one every other reader makes for that record too
(`projections.ledger`). The read API shows the same ledgers. A record that cannot be folded
(undecodable, out of range, or one the fold raises on) is skipped and counted (`skipped`), the same
way on every worker; the reader never dies on a record.

The topic is compacted and time-retained. Reservations and reconciliations have keys of their own
(`<route>/<reservation id>`, `…/actual`), so compaction never merges them; every so often a reader
writes a `RouteCheckpoint` of each route it folded (key `checkpoint/<route>`, compacted to the
latest): the ledger as it stood before an offset. A reader starting up finds each route's latest
checkpoint, takes its state up and folds only the records after it, so it holds exactly what a
reader of every record holds, and what retention removes before a checkpoint is never needed.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from uuid import UUID

from aiokafka import TopicPartition

from projections.ledger import Decision, Metering, RouteLedger, checkpoint_problem, problem_of
from schemas.codec import decode_as
from schemas.errors import CodecError
from schemas.types import uuid_text
from schemas.work import RouteCheckpoint, RouteReconciled, RouteReserved
from streams.broker.access import KafkaAccess
from streams.broker.clients import kafka_consumer
from streams.broker.compat import (
    BrokerProfile,
    FetchPacer,
    end_offsets,
    partitions_known,
    records_between,
    start_whole,
)
from streams.clock import utc_now
from streams.readers.follower import TopicFollower, poll_or_wait
from streams.runtime.publisher import Sink, Written, outgoing, partition_of

log = logging.getLogger(__name__)
MAX_RECORDS = 5_000
CHECKPOINT = "checkpoint/"
# Each reader writes a route's checkpoint after a jittered count or age, so readers seldom all write one.
CHECKPOINT_AFTER_RECORDS = 5_000
CHECKPOINT_AFTER_S = 600.0
KEPT_CHECKPOINTS = 256
KEPT_APART = timedelta(seconds=60)
REWRITE_AFTER_S = 86_400.0  # an unchanged route's checkpoint, written again well inside retention


def reservation_key(route: str, reservation_id: UUID) -> str:
    return f"{route}/{uuid_text(reservation_id)}"


def reconciliation_key(route: str, reservation_id: UUID) -> str:
    return f"{reservation_key(route, reservation_id)}/actual"


class _Progress:
    """What a route's reader knows of its checkpoints: where the latest leaves off, what came since."""

    def __init__(self) -> None:
        self.through = 0  # records before this offset are in the state taken up
        self.since = 0  # records folded since the latest checkpoint in the log
        self.written_at: datetime | None = None
        self.jitter = 1 + random.random()  # noqa: S311 - spreads writers, nothing secret


class LedgerReader(TopicFollower):
    def __init__(
        self,
        kafka: KafkaAccess,
        topic: str,
        profile: BrokerProfile,
        meterings: Mapping[str, Metering],
        publisher: Sink | None = None,
    ) -> None:
        self._kafka = kafka
        self._topic = topic
        self._profile = profile
        self._publisher = publisher
        self._meterings = meterings
        self.ledgers = {name: RouteLedger(metering) for name, metering in meterings.items()}
        self._progress_of = {name: _Progress() for name in meterings}
        self._partitions = 1
        self._started_at = utc_now()
        self._consumer = kafka_consumer(kafka, enable_auto_commit=False, **profile.consumer_options())
        self._pacer = FetchPacer(self._consumer, profile)
        self._read: dict[int, int] = {}  # partition -> next offset to fold
        self._progress = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self.skipped = 0
        self.folded = 0  # reservations and reconciliations folded (not those a checkpoint covered)
        self.kept: dict[str, list[RouteCheckpoint]] = {name: [] for name in meterings}  # for as-of reads

    async def start(self) -> None:
        await start_whole(self._consumer.start, self._consumer.stop)
        partitions = await partitions_known(self._consumer, [self._topic])
        self._partitions = max(len(partitions), 1)
        self._consumer.assign(partitions)
        await self._consumer.seek_to_beginning(*partitions)
        await self._take_up_checkpoints(partitions)
        self._task = asyncio.create_task(self._follow(), name="route-ledger")

    def partition_for(self, route: str) -> int:
        """The partition of every record of `route`."""
        return partition_of(route.encode(), self._partitions)

    async def _take_up_checkpoints(self, partitions: list[TopicPartition]) -> None:
        """Each route's ledger from its latest checkpoint; each partition read on from the earliest
        offset one of its routes still needs."""
        found: dict[str, list[tuple[int, bytes]]] = {}
        ends = await end_offsets(self._kafka, partitions, self._profile)
        for tp in partitions:
            if ends.get(tp, 0) <= 0:
                continue
            reading = records_between(
                self._kafka, tp, None, ends[tp], isolation_level=self._profile.isolation_level
            )
            async for records in reading:
                for record in records:
                    key = record.key or b""
                    if key.startswith(CHECKPOINT.encode()) and record.value is not None:
                        route = key[len(CHECKPOINT) :].decode(errors="replace")
                        found.setdefault(route, []).append((record.offset, record.value))
        for route, candidates in found.items():
            if route in self.ledgers:
                self._take_up_latest(route, candidates)
        for tp in partitions:
            needed = [
                progress.through
                for route, progress in self._progress_of.items()
                if self.partition_for(route) == tp.partition
            ]
            if needed and min(needed) > 0:
                self._consumer.seek(tp, min(needed))

    def _take_up_latest(self, route: str, candidates: list[tuple[int, bytes]]) -> None:
        """The latest checkpoint of `route` that can be taken up; none: its records from the start."""
        for offset, value in reversed(candidates):
            try:
                checkpoint = decode_as(value, RouteCheckpoint)
                problem = checkpoint_problem(checkpoint, offset)
                if checkpoint.route != route:
                    problem = f"it is route {checkpoint.route[:80]!r}'s"
            except CodecError as exc:
                problem = f"it does not decode ({exc})"
            if problem is None:
                self._keep(checkpoint)
                self.ledgers[route] = RouteLedger.restored(self._meterings[route], checkpoint)
                progress = self._progress_of[route]
                progress.through, progress.written_at = checkpoint.through_offset, checkpoint.written_at
                return
            self.skipped += 1
            log.warning("route %s's checkpoint at offset %d is passed over: %s", route, offset, problem)

    async def decision(self, reservation: RouteReserved, written: Written) -> Decision:
        """The decision on a reservation this worker wrote, once the fold has reached it."""
        self._pacer.observed(1)  # a reservation is waiting: read at the short fetch wait
        async with self._progress:
            await self._progress.wait_for(lambda: self._read.get(written.partition, 0) > written.offset)
        decided = self.ledgers[reservation.route].decision(reservation.reservation_id)
        if decided is None:  # forgotten among newer decisions: cannot happen within its own wait
            return Decision(False, "ROUTE_UNAVAILABLE")
        return decided

    async def _follow(self) -> None:
        while True:
            polled = await poll_or_wait(self._consumer, MAX_RECORDS, "the route ledger")
            self._pacer.observed(sum(len(records) for records in polled.values()))
            if not polled:
                continue
            for tp, records in polled.items():
                for record in records:
                    self._fold(record.value or b"", tp.partition, record.offset)
                self._read[tp.partition] = records[-1].offset + 1
            async with self._progress:
                self._progress.notify_all()
            await self._checkpoint_due()

    async def _checkpoint_due(self) -> None:
        """Writes the checkpoint of each route whose records since the last one are many or old."""
        if self._publisher is None:
            return
        now = utc_now()
        due = []
        for route, progress in self._progress_of.items():
            partition = self.partition_for(route)
            if partition not in self._read:
                continue  # not read up to anywhere yet
            age = (now - (progress.written_at or self._started_at)).total_seconds()
            many = progress.since >= CHECKPOINT_AFTER_RECORDS * progress.jitter
            old = age >= (CHECKPOINT_AFTER_S if progress.since else REWRITE_AFTER_S) * progress.jitter
            if not (many or old) or (progress.written_at is None and not progress.since):
                continue
            checkpoint = self.ledgers[route].checkpoint(route, self._read[partition], now)
            if checkpoint is None:
                log.warning("route %s holds too many unreconciled reservations to checkpoint", route)
                continue
            due.append(outgoing(self._topic, CHECKPOINT + route, checkpoint, partition=partition, at=now))
            progress.since, progress.written_at = 0, now
        if due:
            try:
                await self._publisher.send_all(due)
            except Exception as exc:  # the records stay the way to the state; tried again later
                log.warning("route checkpoints could not be written: %s", exc)

    def _keep(self, checkpoint: RouteCheckpoint) -> None:
        """Remembers a checkpoint as a starting point of as-of reads: at most `KEPT_CHECKPOINTS` per
        route, every other one let go when full, so they reach further back ever more sparsely."""
        kept = self.kept[checkpoint.route]
        if kept and checkpoint.written_at < kept[-1].written_at + KEPT_APART:
            return
        kept.append(checkpoint)
        if len(kept) > KEPT_CHECKPOINTS:
            kept[:] = kept[::2]

    def _fold(self, value: bytes, partition: int, offset: int) -> None:
        try:
            problem = self._folded(value, offset)
        except CodecError as exc:
            problem = f"it does not decode ({exc})"
        except Exception as exc:  # whatever a record makes the fold raise is that record's, not the reader's
            problem = f"folding it raised {type(exc).__name__}: {exc}"
        if problem is not None:
            self.skipped += 1
            log.warning("route ledger record %d/%d is skipped: %s", partition, offset, problem)

    def _folded(self, value: bytes, offset: int) -> str | None:
        record = decode_as(value, RouteReserved, RouteReconciled, RouteCheckpoint)
        if not isinstance(record, RouteReserved | RouteReconciled | RouteCheckpoint):
            return f"a {type(record).__name__} is not a ledger record"
        ledger = self.ledgers.get(record.route)
        progress = self._progress_of.get(record.route)
        if ledger is None or progress is None:
            return None  # a route this deployment no longer meters
        if isinstance(record, RouteCheckpoint):
            progress.since, progress.written_at = 0, record.written_at  # another reader's, or this one's
            if checkpoint_problem(record, offset) is None:
                self._keep(record)
            return None
        if offset < progress.through:
            return None  # in the checkpoint this reader started from
        progress.since += 1
        self.folded += 1
        problem = problem_of(record)
        if problem is not None:
            return problem
        if isinstance(record, RouteReserved):
            ledger.reserve(record)
        else:
            ledger.reconcile(record)
        return None


class TooLongAgoError(Exception):
    """An as-of read would fold more of the route log than one read may."""


async def ledgers_as_of(
    kafka: KafkaAccess,
    topic: str,
    profile: BrokerProfile,
    metered: Mapping[str, Metering],
    at: datetime,
    kept: Mapping[str, Sequence[RouteCheckpoint]],
    most_records: int,
) -> dict[str, RouteLedger]:
    """Each metered route's ledger as the records written up to `at` made it: from the latest
    checkpoint a reader kept from before `at` (else the log's start), folded in log order, off the
    event loop, so the fold decides as the readers did then.

    Raises `LogGapError` when retention has removed records the fold needs, `TooLongAgoError` when
    it would fold more than `most_records`.
    """
    start_of = {name: _latest_before(kept.get(name, ()), at) for name in metered}
    ledgers: dict[str, RouteLedger] = {}
    through: dict[str, int] = {}
    for name, metering in metered.items():
        checkpoint = start_of[name]
        ledgers[name] = (
            RouteLedger(metering) if checkpoint is None else RouteLedger.restored(metering, checkpoint)
        )
        through[name] = 0 if checkpoint is None else checkpoint.through_offset
    consumer = kafka_consumer(kafka, enable_auto_commit=False)
    try:
        await start_whole(consumer.start, consumer.stop)
        partitions = await partitions_known(consumer, [topic])
    finally:
        await consumer.stop()
    ends = await end_offsets(kafka, partitions, profile)
    cutoff_ms = int(at.timestamp() * 1000)
    folded = 0
    for partition in partitions:
        routes = [
            name for name in metered if partition_of(name.encode(), len(partitions)) == partition.partition
        ]
        if not routes:
            continue
        start = min(through[name] for name in routes)
        if ends[partition] - start > most_records - folded:
            raise TooLongAgoError(f"it would fold more than {most_records} route records")
        reading = records_between(
            kafka, partition, start, ends[partition], isolation_level=profile.isolation_level
        )
        async for records in reading:
            kept_values = [
                (record.offset, record.value)
                for record in records
                if record.timestamp <= cutoff_ms and record.value is not None
            ]
            folded += len(records)
            await asyncio.to_thread(_fold_all_as_of, ledgers, through, kept_values)
    return ledgers


def _latest_before(checkpoints: Sequence[RouteCheckpoint], at: datetime) -> RouteCheckpoint | None:
    before = [checkpoint for checkpoint in checkpoints if checkpoint.written_at <= at]
    return before[-1] if before else None


def _fold_all_as_of(
    ledgers: Mapping[str, RouteLedger], through: Mapping[str, int], records: list[tuple[int, bytes]]
) -> None:
    for offset, value in records:
        _fold_as_of(ledgers, through, offset, value)


def _fold_as_of(
    ledgers: Mapping[str, RouteLedger], through: Mapping[str, int], offset: int, value: bytes
) -> None:
    """A reservation or reconciliation into its route's ledger, unless the checkpoint the ledger
    started from covers it; anything else (a checkpoint, a record no fold could use) is left out, as
    the readers leave it out."""
    try:
        record = decode_as(value, RouteReserved, RouteReconciled, RouteCheckpoint)
    except CodecError:
        return
    route = getattr(record, "route", "")
    ledger = ledgers.get(route)
    if (
        ledger is None
        or offset < through.get(route, 0)
        or not isinstance(record, RouteReserved | RouteReconciled)
        or problem_of(record) is not None
    ):
        return
    if isinstance(record, RouteReserved):
        ledger.reserve(record)
    else:
        ledger.reconcile(record)
