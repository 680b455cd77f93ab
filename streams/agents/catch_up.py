"""Which commands partitions the lifecycle keeps: a partition assigned to this worker is caught up
with its events (snapshots first, then the log from where the store stopped) before its commands
are handled; a gap in the log keeps it unserved, saying what an operator can do."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiokafka import TopicPartition

from projections.jobstore import JobStore
from streams.broker.compat import BrokerProfile, LogGapError, end_offsets
from streams.readers.events_log import fold_log
from streams.runtime.consumer import PartitionControl
from streams.settings import Settings

log = logging.getLogger(__name__)
CATCH_UP_RETRY_S = 1.0
LOG_GAP_RETRY_S = 30.0  # a gap waits for an operator: a restored topic, or a gap accepted


class PartitionCatchUp:
    def __init__(
        self,
        settings: Settings,
        profile: BrokerProfile,
        store: JobStore,
        restore: Callable[[int], Awaitable[bool]] | None = None,
    ) -> None:
        self._settings = settings
        self._profile = profile
        self._store = store
        self._restore = restore
        self._owned: set[int] = set()
        self._adopting: dict[int, asyncio.Task[None]] = {}
        self._blocked: dict[int, str] = {}  # partition -> why it cannot be caught up
        self._closed = False
        self._control: PartitionControl | None = None
        self._events_from_log = 0  # events folded from the log rather than as they were decided

    @property
    def owned(self) -> list[int]:
        """Commands partitions whose state has caught up with the log, and which this worker handles."""
        return sorted(self._owned)

    @property
    def catching_up(self) -> list[int]:
        return sorted(self._adopting)

    @property
    def blocked(self) -> dict[int, str]:
        return self._blocked

    @property
    def events_from_log(self) -> int:
        return self._events_from_log

    def keeps(self, partition: int) -> bool:
        return partition in self._owned

    def may_write(self, partition: int) -> bool:
        """Only the owner appends: a partition revoked since its commands were taken is left alone."""
        control = self._control
        owned = partition in self._owned
        if control is not None:
            owned = owned and control.owns(TopicPartition(self._settings.topic("commands"), partition))
        if not owned:
            log.warning(
                "commands partition %d moved to another worker: its decisions are not appended", partition
            )
        return owned

    async def assigned(self, partitions: set[TopicPartition], control: PartitionControl) -> None:
        if self._closed:  # an assignment while the worker stops: its store is going away
            return
        self._control = control
        control.hold(partitions, "catch-up")
        for tp in partitions:
            if tp.partition not in self._owned and tp.partition not in self._adopting:
                self._adopting[tp.partition] = asyncio.create_task(self._adopt(tp))

    async def _adopt(self, tp: TopicPartition) -> None:
        while True:
            try:
                await self.adopt(tp.partition)
                break
            except LogGapError as exc:
                if self._closed:
                    return
                if self._blocked.get(tp.partition) != str(exc):
                    log.error("partition %d is not served: %s", tp.partition, exc)
                self._blocked[tp.partition] = str(exc)
                await asyncio.sleep(LOG_GAP_RETRY_S)
            except Exception as exc:
                if self._closed:
                    return
                log.warning("catching up partition %d failed (%s); retrying", tp.partition, exc)
                await asyncio.sleep(CATCH_UP_RETRY_S)
        self._blocked.pop(tp.partition, None)
        self._adopting.pop(tp.partition, None)
        if self._control is not None:
            self._control.release([tp], "catch-up")

    async def adopt(self, partition: int) -> None:
        """Take over a commands partition: fold its events first, then handle its commands."""
        await self.catch_up(partition)
        self._owned.add(partition)

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        for tp in partitions:
            self._owned.discard(tp.partition)
            self._blocked.pop(tp.partition, None)
            task = self._adopting.pop(tp.partition, None)
            if task is not None:
                task.cancel()

    async def close(self) -> None:
        self._closed = True
        for task in self._adopting.values():
            task.cancel()
        await asyncio.gather(*self._adopting.values(), return_exceptions=True)

    async def catch_up(self, partition: int) -> int:
        """Fold the events of `partition` this store has not seen (written before a crash or elsewhere)."""
        events_partition = TopicPartition(self._settings.topic("events"), partition)
        folded_before = self._store.has_offset(partition)
        if self._restore is not None:
            await self._restore(partition)
        start = self._store.events_offset(partition)
        end = (await end_offsets(self._settings.kafka_access, [events_partition], self._profile))[
            events_partition
        ]
        if start >= end:
            return 0
        try:
            folded = await fold_log(self._settings, events_partition, start, end, self._store)
        except LogGapError as exc:
            if partition not in self._settings.accept_log_gap or folded_before:
                raise LogGapError(f"{exc}. {_gap_advice(partition, folded_before)}") from exc
            log.warning(
                "%s; accepted by SCRAPESTREAM_ACCEPT_LOG_GAP: the jobs of those events are forgotten", exc
            )
            folded = await fold_log(self._settings, events_partition, None, end, self._store)
        self._events_from_log += folded
        log.info("partition %d: folded %d events from the log", partition, folded)
        return folded


def _gap_advice(partition: int, folded_before: bool) -> str:
    """What an operator can do about a gap: a store that folded the partition before can start afresh
    from the snapshots; one that had nothing but the snapshots lacks those events for good."""
    if folded_before:
        return (
            "This store missed them: start the worker on an empty SCRAPESTREAM_DATA_DIR, it recovers"
            " from the snapshot topic"
        )
    return (
        "No snapshot covers them: the jobs whose events these were cannot be rebuilt. Restore the"
        " events and snapshots topics from a backup, or accept the loss with"
        f" SCRAPESTREAM_ACCEPT_LOG_GAP=[{partition}] (those jobs are forgotten, the rest is served)"
    )
