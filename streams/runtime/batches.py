"""A stage's batch run to its end: retried while the infrastructure fails (the stage recovering
first), the record that breaks it isolated to dead input one record at a time, and let go when its
partition moved to another worker (whose consumer reads it again)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from aiokafka import TopicPartition

from streams.runtime.commit_order import OUTSIDE, Batch, CommitOrder
from streams.runtime.deadinput import DeadLetters
from streams.runtime.failures import waiting_for
from streams.runtime.local_records import settle_local
from streams.runtime.transactions import FencedError, NotHeldError

log = logging.getLogger(__name__)
RETRY_BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0)
Record = Any  # aiokafka's ConsumerRecord, or a LocalRecord


class Handler(Protocol):
    """What of a stage a batch's run needs (`streams.runtime.consumer.Stage`)."""

    name: str

    async def handle(self, records: Sequence[Record], batch: Batch = OUTSIDE) -> None: ...

    async def recover(self, records: Sequence[Record]) -> None: ...


class Membership(Protocol):
    """What the batch runner asks of the consumer group member it runs for."""

    def revoking(self) -> set[TopicPartition]: ...

    def owns(self, partition: TopicPartition) -> bool: ...

    def rejoin(self) -> None: ...


class BatchRunner:
    def __init__(self, order: CommitOrder, dead_letters: DeadLetters, member: Membership) -> None:
        self._order = order
        self._dead = dead_letters
        self._member = member

    async def run(
        self, stage: Handler, batch: list[Record], earlier: Sequence[Record] = (), keep_open: bool = False
    ) -> list[Record]:
        """Handle `batch` (with `keep_open`, in the transaction `earlier` records left open, if any);
        returns the records done (handled or sent to dead input). A failure aborts the transaction, so
        `earlier` records are handled again with the batch."""
        for attempt in range(1_000_000):
            revoking = self._member.revoking()
            if revoking:
                batch = [r for r in batch if TopicPartition(r.topic, r.partition) not in revoking]
            if not batch:
                return []  # the partitions moved to another worker meanwhile: it reads them again
            try:
                async with self._order.transaction_of(batch, keep_open) as handle:
                    await stage.handle(batch, handle)
                return batch
            except (FencedError, NotHeldError) as exc:
                return self.let_go(stage, batch, exc)
            except Exception as exc:
                batch, earlier, keep_open = [*earlier, *batch], (), False
                what = waiting_for(exc)
                if what is None:
                    return await self._isolate(stage, batch, exc)
                delay = RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)]
                log.warning(
                    "%s: waiting for %s (%s: %s); retrying %d records in %.1f s",
                    stage.name, what, type(exc).__name__, exc, len(batch), delay,
                )  # fmt: skip
                await asyncio.sleep(delay)
                await self.recover(stage, batch)
        raise AssertionError("unreachable")

    async def recover(self, stage: Handler, batch: list[Record]) -> None:
        try:
            await stage.recover(batch)
        except Exception as exc:
            log.warning("%s: recovery before retry failed (%s); the retry recovers again", stage.name, exc)

    async def _isolate(self, stage: Handler, batch: list[Record], exc: Exception) -> list[Record]:
        """A failure that is not the infrastructure's: find the record that causes it."""
        if len(batch) == 1:
            (record,) = batch
            reason = f"{stage.name} cannot handle it: {type(exc).__name__}: {exc}"
            log.error("%s/%d@%d: %s", record.topic, record.partition, record.offset, reason, exc_info=exc)
            try:
                async with self._order.transaction_of([record]) as handle:
                    await self._dead.send(
                        record.topic,
                        record.partition,
                        record.offset,
                        record.key,
                        record.value,
                        reason,
                        handle,
                    )
            except (FencedError, NotHeldError) as lost:
                return self.let_go(stage, batch, lost)
            return batch
        log.warning(
            "%s: a batch of %d failed (%s); handling its records one by one", stage.name, len(batch), exc
        )
        await self.recover(stage, batch)
        done: list[Record] = []
        for record in batch:
            done += await self.run(stage, [record])
        return done

    def let_go(self, stage: Handler, batch: list[Record], exc: FencedError | NotHeldError) -> list[Record]:
        """A batch of partitions this worker no longer holds is not done: their holder reads it."""
        if isinstance(exc, FencedError):
            log.warning("%s: %s; leaving it to its new holder and rejoining the group", stage.name, exc)
            self._member.rejoin()
        elif any(self._member.owns(TopicPartition(r.topic, r.partition)) for r in batch):
            log.warning("%s: a partition is assigned but not held; rejoining the group", stage.name)
            self._member.rejoin()
        return []

    async def end_open(
        self,
        stage: Handler,
        uncommitted: dict[TopicPartition, list[Record]],
        queue: Iterable[Record],
        spanned_only: bool = False,
        only: set[TopicPartition] | None = None,
    ) -> None:
        """Commit the transactions `uncommitted` left open: all (of `only`), or those open for `SPAN_S`
        or with none of their partition's records in `queue`. One that fails is handled again."""
        queued = {(r.topic, r.partition) for r in queue} if spanned_only and uncommitted else set()
        for tp in list(uncommitted):
            if only is not None and tp not in only:
                continue
            if spanned_only and (tp.topic, tp.partition) in queued and not self._order.spanned(tp):
                continue
            records = uncommitted.pop(tp)
            try:
                await self._order.end(tp)
            except (FencedError, NotHeldError) as exc:
                self.let_go(stage, records, exc)
                settle_local(records, taken=False)
                continue
            except Exception as exc:
                log.warning(
                    "%s: committing %d records of %s failed (%s); handling them again",
                    stage.name, len(records), tp, exc,
                )  # fmt: skip
                await self.recover(stage, records)
                settle_local(await self.run(stage, records), taken=True)
                settle_local(records, taken=False)
            else:
                settle_local(records, taken=True)
