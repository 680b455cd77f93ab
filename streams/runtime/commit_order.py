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
   the partition was assigned, and the committed offsets then read again);
2. the stage handles the part: everything it sends goes into the transaction;
3. the transaction commits the sends with the part's input offsets, or neither lands;
4. then the lifecycle folds its events (`after_commit`): its store never holds an aborted batch;
5. the offsets are not committed again: the transaction did it.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from aiokafka import TopicPartition

from streams.runtime.transactions import PartitionTransactions


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

    def transaction_of(self, part: Sequence[Batched]) -> contextlib.AbstractAsyncContextManager[object]: ...

    async def assigned(
        self, partitions: set[TopicPartition], reread: Callable[[set[TopicPartition]], Awaitable[None]]
    ) -> None: ...

    async def revoked(self, partitions: set[TopicPartition]) -> None: ...

    async def close(self) -> None: ...


class AtLeastOnce:
    commits_offsets = True

    def parts(self, batch: list[R]) -> list[list[R]]:
        return [batch]

    def transaction_of(self, part: Sequence[Batched]) -> contextlib.AbstractAsyncContextManager[object]:
        return contextlib.nullcontext()

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

    def transaction_of(self, part: Sequence[Batched]) -> contextlib.AbstractAsyncContextManager[object]:
        """The transaction of one input partition's part: it commits the input through the part's last
        offset (none for a part handed over inside the worker: `LocalRecord`s have no offset)."""
        last = part[-1]
        offsets = [record.offset for record in part if record.offset >= 0]
        next_offset = max(offsets) + 1 if offsets else None
        return self._transactions.transaction(TopicPartition(last.topic, last.partition), next_offset)

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
