"""Exactly-once processing on Kafka: what a stage produced for a batch of one input partition, and
that batch's input offset, commit together in one transaction, or neither does.

Each input partition a worker holds has its own transactional producer, its id derived from the
group, the topic and the partition: whoever holds the partition next starts a producer with the
same id, which fences the previous holder's (a stalled worker's later commit fails with
`ProducerFenced`) and ends its open transaction. aiokafka commits transactional offsets without
the group's generation (no KIP-447), so this per-partition id is the fencing, not the group.

A transaction may be left open after a batch (`keep_open`) and go on with the partition's next
batches, up to `SPAN_S` (Kafka Streams' commit interval under exactly-once): one commit for
several batches under load; `end` commits it.

A stage sends into a transaction through the batch handle the commit order hands it
(`streams/runtime/commit_order.py`, `Batch`): what it sends with the handle goes in, what must follow
the commit waits for it, so local state never holds what an aborted transaction wrote. Work a batch
starts in tasks of its own (the executor's fetches) has no handle, and sends outside.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    InvalidProducerEpoch,
    InvalidProducerIdMapping,
    InvalidTxnState,
    KafkaError,
    OutOfOrderSequenceNumber,
    ProducerFenced,
    UnknownProducerId,
)

from streams.broker.access import KafkaAccess, KafkaAccessError
from streams.broker.compat import BrokerProfile, new_producer, shielded, start_whole
from streams.broker.refusals import denial
from streams.errors import BrokerError

log = logging.getLogger(__name__)
TRANSACTION_TIMEOUT_MS = 60_000  # an open transaction of a worker that died is aborted after this
COMMIT_WITHIN_S = 60.0  # past aiokafka's 40 s request timeout: a commit still pending then is stuck
SPAN_S = 0.1  # the longest a transaction stays open for more batches of its partition


# The producer's sequence or transaction state no longer agrees with the broker's (after a broker
# stalled or lost it): retrying with it fails the same way for good, a new producer starts clean.
PRODUCER_LOST = (
    OutOfOrderSequenceNumber,
    InvalidProducerEpoch,
    InvalidProducerIdMapping,
    UnknownProducerId,
    InvalidTxnState,
)


class FencedError(BrokerError):
    """Another worker holds the partition now: this one's transaction for it was refused."""


class NotHeldError(BrokerError):
    """No producer for the partition: this worker does not hold it (any more, or yet)."""


class StuckCommitError(BrokerError):
    """A commit that did not complete in time: its producer is let go, and the next holder's
    (this worker's again, after it rejoined) ends the transaction."""


@dataclass
class OpenTransaction:
    producer: AIOKafkaProducer
    began: float  # on the event loop's clock
    after: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    ended: list[Callable[[], None]] = field(default_factory=list)
    next_offset: int | None = None  # the input offset it commits
    last_written: dict[tuple[str, int], int] = field(default_factory=dict)  # per topic-partition


def transactional_id(group_id: str, partition: TopicPartition) -> str:
    return f"{group_id}.{partition.topic}.{partition.partition}"


class PartitionTransactions:
    """One transactional producer per input partition this worker holds."""

    def __init__(
        self, kafka: KafkaAccess, profile: BrokerProfile, group_id: str, counters: Counter[str] | None = None
    ) -> None:
        self._counters: Counter[str] = Counter() if counters is None else counters  # transactions.<how>
        self._kafka = kafka
        self._group_id = group_id
        self._profile = profile
        self._producers: dict[TopicPartition, AIOKafkaProducer] = {}
        self._open: dict[TopicPartition, OpenTransaction] = {}  # left open for the next batches

    async def hold(self, partitions: set[TopicPartition]) -> None:
        """Start the producers of newly held partitions, together: each fences its previous holder's."""
        starting = sorted(partitions - set(self._producers))
        producers = {
            tp: new_producer(
                self._kafka,
                self._profile,
                transactional_id=transactional_id(self._group_id, tp),
                transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
            )
            for tp in starting
        }
        started = await asyncio.gather(
            *(start_whole(producer.start, producer.stop) for producer in producers.values()),
            return_exceptions=True,
        )
        failed = [(tp, result) for tp, result in zip(starting, started, strict=True) if result is not None]
        for tp, producer in producers.items():
            if failed:
                await producer.stop()
            else:
                self._producers[tp] = producer
        if failed:
            tp, error = failed[0]
            denied = denial(
                error, self._kafka, f"use the transactional id {transactional_id(self._group_id, tp)}"
            )
            if denied is not None:
                raise denied from None
            raise BrokerError(f"cannot start the transactional producer of {tp}: {error}") from error

    async def probe(self) -> None:
        """Start and stop one transactional producer: `BrokerError` when the broker cannot."""
        tp = TopicPartition("probe", os.getpid())
        await self.hold({tp})
        await self.release({tp})

    async def release(self, partitions: set[TopicPartition]) -> None:
        for tp in partitions:
            left_open = self._open.pop(tp, None)
            if left_open is not None:  # its producer's successor, or the broker's timeout, aborts it
                _run_ended(left_open)
            producer = self._producers.pop(tp, None)
            if producer is not None:
                with contextlib.suppress(KafkaError):
                    await producer.stop()

    async def close(self) -> None:
        await self.release(set(self._producers))

    def is_open(self, tp: TopicPartition) -> bool:
        """Whether a transaction of `tp` was left open for its next batches."""
        return tp in self._open

    def spanned(self, tp: TopicPartition) -> bool:
        """Whether the transaction left open for `tp` has been open for `SPAN_S` or longer."""
        left_open = self._open.get(tp)
        return left_open is not None and asyncio.get_running_loop().time() - left_open.began >= SPAN_S

    @contextlib.asynccontextmanager
    async def transaction(
        self, tp: TopicPartition, next_offset: int | None, keep_open: bool = False
    ) -> AsyncIterator[OpenTransaction]:
        """Everything sent inside commits with the input offset `next_offset` of `tp` (if any), then the
        deferred actions run; or, with `keep_open`, later with what the next batches send (`end`). It
        goes on with a transaction left open for `tp`. An exception aborts it, with every batch it
        held (and re-raises; `FencedError` when another holds `tp`)."""
        current = self._open.pop(tp, None) or await self._begin(tp)
        if next_offset is not None:
            current.next_offset = max(next_offset, current.next_offset or 0)
        try:
            yield current
        except BaseException as exc:
            await self._abort(tp, current, exc)
            raise
        if keep_open:
            self._open[tp] = current
        else:
            await self._end(tp, current)

    async def end(self, tp: TopicPartition) -> None:
        """Commit the transaction left open for `tp`, if any, then run its deferred actions; an
        exception aborts it (`FencedError` when another holds `tp`): its batches must be handled again."""
        current = self._open.pop(tp, None)
        if current is not None:
            await self._end(tp, current)

    async def _begin(self, tp: TopicPartition) -> OpenTransaction:
        producer = self._producers.get(tp)
        if producer is None:
            raise NotHeldError(f"{tp} is not held by this worker")
        try:
            await producer.begin_transaction()
        except ProducerFenced as exc:
            self._counters["transactions.fenced"] += 1
            await self.release({tp})
            raise FencedError(f"{tp} moved to another worker") from exc
        return OpenTransaction(producer, asyncio.get_running_loop().time())

    async def _end(self, tp: TopicPartition, current: OpenTransaction) -> None:
        try:
            try:
                await self._commit(current.producer, tp, current.next_offset)
            except BaseException as exc:
                await self._abort(tp, current, exc)
                raise
            self._counters["transactions.committed"] += 1
            for action in current.after:
                await action()
        finally:
            _run_ended(current)

    async def _abort(self, tp: TopicPartition, current: OpenTransaction, exc: BaseException) -> None:
        """End `current` after `exc`; raises `FencedError` when its successor ended it already (a
        cancellation stays what its caller sees, the fence counted)."""
        _run_ended(current)
        ending: BaseException | None = exc
        if not isinstance(exc, ProducerFenced) and not _unusable(current.producer, exc):
            ending = await _abort_refusal(current.producer)
        if isinstance(ending, ProducerFenced):
            self._counters["transactions.fenced"] += 1
            await self.release({tp})
            if isinstance(exc, Exception):
                raise FencedError(f"{tp} moved to another worker") from ending
            return
        self._counters["transactions.aborted"] += 1
        if ending is not None:
            await self._replace(tp)

    async def _replace(self, tp: TopicPartition) -> None:
        """A new producer for `tp` in place of one that cannot go on: starting it fences the old one and
        ends its open transaction, and the partition stays held (no rebalance). One that cannot start
        leaves `tp` let go: its next batch finds it not held, and the worker rejoins the group."""
        await self.release({tp})
        self._counters["transactions.replaced"] += 1
        try:
            await self.hold({tp})
        except (BrokerError, KafkaAccessError) as exc:  # the batch's own failure is what its caller sees
            log.warning("%s: a new transactional producer could not start (%s); letting it go", tp, exc)

    async def _commit(self, producer: AIOKafkaProducer, tp: TopicPartition, next_offset: int | None) -> None:
        try:
            async with asyncio.timeout(COMMIT_WITHIN_S):
                if next_offset is not None:
                    await shielded(producer.send_offsets_to_transaction({tp: next_offset}, self._group_id))
                await producer.commit_transaction()
        except TimeoutError as exc:
            raise StuckCommitError(
                f"the commit of {tp} did not complete within {COMMIT_WITHIN_S:.0f} s"
            ) from exc


def _unusable(producer: AIOKafkaProducer, exc: BaseException) -> bool:
    """Whether `producer` cannot go on after `exc`: stuck, out of step with the broker, or its sender
    stopped (aiokafka stops it for good on an answer it does not expect, e.g. InvalidTxnState)."""
    if isinstance(exc, (StuckCommitError, *PRODUCER_LOST)):
        return True
    sender = producer._sender.sender_task  # aiokafka has no public call for it
    return sender is not None and sender.done()


async def _abort_refusal(producer: AIOKafkaProducer) -> BaseException | None:
    """Abort the open transaction: None when done (or left to the broker's timeout), else what refused
    it: `ProducerFenced` when its successor ended it, an `AssertionError` when aiokafka cannot abort."""
    refusal: BaseException | None = None
    try:
        await producer.abort_transaction()
    except ProducerFenced as exc:
        refusal = exc
    except KafkaError as exc:
        log.info("aborting a transaction failed (%s); the broker aborts it at its timeout", exc)
    except AssertionError as exc:
        refusal = _fence_of(producer) or exc
    return refusal


def _fence_of(producer: AIOKafkaProducer) -> ProducerFenced | None:
    """The fence that ended the producer's transaction while nobody awaited it, if one did."""
    ended = producer._txn_manager.wait_for_transaction_end()  # aiokafka has no public call for it
    failure = ended.exception() if ended.done() and not ended.cancelled() else None
    return failure if isinstance(failure, ProducerFenced) else None


def _run_ended(transaction: OpenTransaction) -> None:
    for action in transaction.ended:
        action()
    transaction.ended.clear()
