"""The order in which a batch of a stage's records becomes done, under each processing guarantee.
The consumer asks the worker's `CommitOrder`; it never branches on the guarantee itself.

`at_least_once`, for a batch of a lane's records:
1. the stage handles the whole batch: it sends what follows from it and waits for the acks;
2. the lifecycle folds its events into its store at once (`after_commit` runs right away);
3. the batch's offsets are marked processed, and committed every `COMMIT_EVERY_S` (at once for a
   stage whose records start work elsewhere); a crash before then redelivers the batch, so its
   sends may repeat, never go missing.

`exactly_once`, for each input partition's part of the batch, in turn:
1. its transaction opens on the partition's own producer (started, fencing the last holder, when
   the partition was assigned, and the committed offsets then read again), or goes on with the
   one left open by the partition's last batch;
2. the stage handles the part: everything it sends goes into the transaction;
3. the transaction is left open while more of the partition's records are queued, for up to
   `SPAN_S`; then it commits the sends of its parts with their input offsets, or none lands (a
   failure aborts every part it held, and they are handled again);
4. then the lifecycle folds its events (`after_commit`): its store never holds an aborted batch;
   the records handed over inside the worker are settled only then;
5. the offsets are not committed again: the transaction did it.

Each stage is handed its batch's `Batch`: it sends with it (`Publisher.send_all(..., batch)`), defers
what must follow the commit with it, and learns from it where a log it wrote ends once the batch
commits (a transaction's commit marker takes an offset after its last record on each partition).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from aiokafka import AIOKafkaProducer, TopicPartition

from streams.runtime.transactions import OpenTransaction, PartitionTransactions


@dataclass(frozen=True)
class Batch:
    """The handle of one batch of a stage's records: the transaction its sends go into (none
    under `at_least_once`, or for work outside any batch)."""

    transaction: OpenTransaction | None = None

    @property
    def transactional(self) -> bool:
        return self.transaction is not None

    def producer(self, outside: AIOKafkaProducer) -> AIOKafkaProducer:
        return outside if self.transaction is None else self.transaction.producer

    def wrote(self, topic: str, partition: int, offset: int) -> None:
        if self.transaction is not None:
            key = (topic, partition)
            self.transaction.last_written[key] = max(offset, self.transaction.last_written.get(key, -1))

    async def after_commit(self, action: Callable[[], Awaitable[None]]) -> None:
        """Runs `action` once the batch has committed (not at all if it aborts); now without one."""
        if self.transaction is None:
            await action()
        else:
            self.transaction.after.append(action)

    def when_ended(self, action: Callable[[], None]) -> None:
        """Runs `action` once the batch's transaction has ended, committed or aborted (its deferred
        actions done); now without one."""
        if self.transaction is None:
            action()
        else:
            self.transaction.ended.append(action)

    def end_after(self, topic: str, partition: int, through: int) -> int:
        """Where the log of `topic`'s `partition` ends once this batch committed, its record at
        `through` the last: after the transaction's commit marker when it wrote none later."""
        last = None if self.transaction is None else self.transaction.last_written.get((topic, partition))
        return through + 1 + (1 if last == through else 0)


OUTSIDE = Batch()  # sends that belong to no batch: each on its own, at once


class Batched(Protocol):
    """A record as the consumer hands it on (`streams.runtime.consumer.Record`)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...


R = TypeVar("R", bound=Batched)


class CommitOrder(Protocol):
    commits_offsets: bool  # whether the consumer commits processed offsets itself

    def parts(self, batch: list[R]) -> list[list[R]]: ...

    def transaction_of(
        self, part: Sequence[Batched], keep_open: bool = False
    ) -> contextlib.AbstractAsyncContextManager[Batch]: ...

    def is_open(self, tp: TopicPartition) -> bool: ...

    def spanned(self, tp: TopicPartition) -> bool: ...

    async def end(self, tp: TopicPartition) -> None: ...

    async def assigned(
        self, partitions: set[TopicPartition], reread: Callable[[set[TopicPartition]], Awaitable[None]]
    ) -> None: ...

    async def revoked(self, partitions: set[TopicPartition]) -> None: ...

    async def close(self) -> None: ...


class AtLeastOnce:
    commits_offsets = True

    def parts(self, batch: list[R]) -> list[list[R]]:
        return [batch]

    def transaction_of(
        self, part: Sequence[Batched], keep_open: bool = False
    ) -> contextlib.AbstractAsyncContextManager[Batch]:
        return contextlib.nullcontext(OUTSIDE)

    def is_open(self, tp: TopicPartition) -> bool:
        return False

    def spanned(self, tp: TopicPartition) -> bool:
        return False

    async def end(self, tp: TopicPartition) -> None:
        return None

    async def assigned(
        self, partitions: set[TopicPartition], reread: Callable[[set[TopicPartition]], Awaitable[None]]
    ) -> None:
        return None

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        return None

    async def close(self) -> None:
        return None


class ExactlyOnce:
    commits_offsets = False

    def __init__(self, transactions: PartitionTransactions) -> None:
        self._transactions = transactions

    def parts(self, batch: list[R]) -> list[list[R]]:
        """Per input partition: each commits in its own transaction."""
        parts: dict[tuple[str, int], list[R]] = defaultdict(list)
        for record in batch:
            parts[(record.topic, record.partition)].append(record)
        return list(parts.values())

    @contextlib.asynccontextmanager
    async def transaction_of(self, part: Sequence[Batched], keep_open: bool = False) -> AsyncIterator[Batch]:
        """The transaction of one input partition's part: it commits the input through the part's last
        offset (none for a part handed over inside the worker: `LocalRecord`s have no offset)."""
        last = part[-1]
        offsets = [record.offset for record in part if record.offset >= 0]
        next_offset = max(offsets) + 1 if offsets else None
        tp = TopicPartition(last.topic, last.partition)
        async with self._transactions.transaction(tp, next_offset, keep_open) as transaction:
            yield Batch(transaction)

    def is_open(self, tp: TopicPartition) -> bool:
        return self._transactions.is_open(tp)

    def spanned(self, tp: TopicPartition) -> bool:
        return self._transactions.spanned(tp)

    async def end(self, tp: TopicPartition) -> None:
        await self._transactions.end(tp)

    async def assigned(
        self, partitions: set[TopicPartition], reread: Callable[[set[TopicPartition]], Awaitable[None]]
    ) -> None:
        """Fence the previous holders first (their open transactions end), then read the committed
        offsets again: one fetched before a previous holder's last commit completed is stale.
        Raises (the producers released) when the producers cannot start."""
        try:
            await self._transactions.hold(partitions)
            await reread(partitions)
        except BaseException:
            await self._transactions.release(partitions)
            raise

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        await self._transactions.release(partitions)

    async def close(self) -> None:
        await self._transactions.close()


def commit_order(transactions: PartitionTransactions | None) -> CommitOrder:
    return AtLeastOnce() if transactions is None else ExactlyOnce(transactions)
