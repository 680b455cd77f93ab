"""Every worker's reading of `scrapestream.routes`: each metered route's ledger, folded in log order.

An executor that wants to spend on a route writes a `RouteReserved` (keyed by the route, so one
partition orders all of that route's records) and waits until this reader has folded the
partition past it: the decision is the one every other reader makes for that record too
(`projections.ledger`). The read API shows the same ledgers. The whole topic is read at start.
A record that cannot be folded (undecodable, out of range, or one the fold raises on) is skipped
and counted (`skipped`), the same way on every worker; the reader never dies on a record.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition

from projections.ledger import Decision, Metering, RouteLedger, problem_of
from schemas.codec import decode_as
from schemas.errors import CodecError
from schemas.work import RouteReconciled, RouteReserved
from streams.broker.compat import BrokerProfile, FetchPacer, start_whole
from streams.global_table import poll_or_wait
from streams.publisher import Written

log = logging.getLogger(__name__)
MAX_RECORDS = 5_000


class LedgerReader:
    def __init__(
        self, bootstrap: str, topic: str, profile: BrokerProfile, meterings: Mapping[str, Metering]
    ) -> None:
        self._topic = topic
        self.ledgers = {name: RouteLedger(metering) for name, metering in meterings.items()}
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, **profile.consumer_options()
        )
        self._pacer = FetchPacer(self._consumer, profile)
        self._read: dict[int, int] = {}  # partition -> next offset to fold
        self._progress = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self.skipped = 0

    async def start(self) -> None:
        await start_whole(self._consumer.start, self._consumer.stop)
        await self._consumer.topics()
        partitions = [
            TopicPartition(self._topic, partition)
            for partition in sorted(self._consumer.partitions_for_topic(self._topic) or ())
        ]
        self._consumer.assign(partitions)
        await self._consumer.seek_to_beginning(*partitions)
        self._task = asyncio.create_task(self._follow(), name="route-ledger")

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

    def _fold(self, value: bytes, partition: int, offset: int) -> None:
        try:
            problem = self._folded(value)
        except CodecError as exc:
            problem = f"it does not decode ({exc})"
        except Exception as exc:  # whatever a record makes the fold raise is that record's, not the reader's
            problem = f"folding it raised {type(exc).__name__}: {exc}"
        if problem is not None:
            self.skipped += 1
            log.warning("route ledger record %d/%d is skipped: %s", partition, offset, problem)

    def _folded(self, value: bytes) -> str | None:
        record = decode_as(value, RouteReserved, RouteReconciled)
        if not isinstance(record, RouteReserved | RouteReconciled):
            return f"a {type(record).__name__} is not a ledger record"
        ledger = self.ledgers.get(record.route)
        if ledger is None:
            return None  # a route this deployment no longer meters
        problem = problem_of(record)
        if problem is not None:
            return problem
        if isinstance(record, RouteReserved):
            ledger.reserve(record)
        else:
            ledger.reconcile(record)
        return None

    @property
    def task(self) -> asyncio.Task[None] | None:
        return self._task

    async def stop(self) -> None:
        try:
            if self._task is not None:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)  # a dead reader stops too
        finally:
            await self._consumer.stop()
