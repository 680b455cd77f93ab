"""`streams.runtime.transactions` on a real broker: what a stage sends for a batch of one input partition
and that batch's input offset commit together or not at all; a partition's next holder fences the
last one; the embedded broker, which has no transactions, is refused by name."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections import Counter
from uuid import uuid4

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import InvalidTxnState, KafkaError, OutOfOrderSequenceNumber
from aiokafka.producer.sender import TxnOffsetCommitHandler

from streams.broker.access import plaintext
from streams.errors import BrokerError
from streams.runtime.commit_order import Batch
from streams.runtime.publisher import Outgoing, Publisher
from streams.runtime.transactions import (
    FencedError,
    NotHeldError,
    PartitionTransactions,
)
from tests.brokers import profile
from tests.integration.test_brokers import create_topic

pytestmark = [pytest.mark.broker, pytest.mark.asyncio(loop_scope="function")]


def kafka_only(broker) -> None:  # type: ignore[no-untyped-def]
    if broker.kind != "kafka":
        pytest.skip("transactions need Apache Kafka; the embedded broker's refusal is tested apart")


async def stage_topics(broker) -> tuple[TopicPartition, str, str]:  # type: ignore[no-untyped-def]
    """A stage's input partition, the topic it writes, and its group (Kafka only)."""
    kafka_only(broker)
    source, sink = await create_topic(broker.bootstrap), await create_topic(broker.bootstrap)
    return TopicPartition(source, 0), sink, uuid4().hex


def transactions_of(broker, group: str, counters: Counter[str] | None = None) -> PartitionTransactions:  # type: ignore[no-untyped-def]
    return PartitionTransactions(broker.access, profile(broker.bootstrap), group, counters)


async def committed_values(bootstrap: str, topic: str) -> list[bytes]:
    reader = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, isolation_level="read_committed", auto_offset_reset="earliest"
    )
    await reader.start()
    try:
        values: list[bytes] = []
        while polled := await reader.getmany(timeout_ms=3_000):
            values += [record.value for records in polled.values() for record in records]
        return values
    finally:
        await reader.stop()


async def committed_offset(bootstrap: str, group: str, tp: TopicPartition) -> int | None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        return await consumer.committed(tp)
    finally:
        await consumer.stop()


@contextlib.asynccontextmanager
async def publishing(bootstrap: str):  # type: ignore[no-untyped-def]
    publisher = Publisher(plaintext(bootstrap), profile(bootstrap))
    await publisher.start()
    try:
        yield publisher
    finally:
        await publisher.stop()


def one(sink: str, value: bytes) -> list[Outgoing]:
    return [Outgoing(sink, b"k", value, partition=0)]


async def one_record_batch(  # type: ignore[no-untyped-def]
    holder: PartitionTransactions, publisher, tp: TopicPartition, next_offset: int, sink: str, value: bytes
) -> None:
    """A stage's batch through `next_offset` of `tp` that sends one record."""
    async with holder.transaction(tp, next_offset) as transaction:
        await publisher.send_all(one(sink, value), Batch(transaction))


async def test_a_batch_far_larger_than_a_default_producer_batch_commits_whole_with_its_offset(broker):
    tp, sink, group = await stage_topics(broker)
    transactions = transactions_of(broker, group)
    values = [f"{n:05d}".encode() * 60 for n in range(400)]  # 120 KB: aiokafka's default batch holds 16 KiB
    folded: list[int] = []
    async with publishing(broker.bootstrap) as publisher:
        await transactions.hold({tp})
        try:
            async with transactions.transaction(tp, 300) as transaction:
                written = await publisher.send_all(
                    [Outgoing(sink, b"k", value, partition=0) for value in values], Batch(transaction)
                )
                await Batch(transaction).after_commit(lambda: _note(folded, written[-1].offset))
        finally:
            await transactions.close()
    assert [w.offset for w in written] == list(range(400))
    assert folded == [399]
    assert await committed_values(broker.bootstrap, sink) == values
    assert await committed_offset(broker.bootstrap, group, tp) == 300


async def _note(into: list[int], offset: int) -> None:
    into.append(offset)


async def test_an_aborted_batch_leaves_no_record_no_offset_and_runs_no_after_commit_action(broker):
    tp, sink, group = await stage_topics(broker)
    transactions = transactions_of(broker, group)
    folded: list[int] = []
    ended: list[str] = []
    async with publishing(broker.bootstrap) as publisher:
        await transactions.hold({tp})
        try:

            async def failing_batch() -> None:
                async with transactions.transaction(tp, 5) as transaction:
                    await publisher.send_all(one(sink, b"aborted"), Batch(transaction))
                    await Batch(transaction).after_commit(lambda: _note(folded, 0))
                    Batch(transaction).when_ended(lambda: ended.append("aborted"))
                    raise RuntimeError("the stage failed")

            with pytest.raises(RuntimeError):
                await failing_batch()
            async with transactions.transaction(tp, 9) as transaction:
                await publisher.send_all(one(sink, b"committed"), Batch(transaction))
                Batch(transaction).when_ended(lambda: ended.append("committed"))
        finally:
            await transactions.close()
    assert folded == []
    assert ended == ["aborted", "committed"]
    assert await committed_values(broker.bootstrap, sink) == [b"committed"]
    assert await committed_offset(broker.bootstrap, group, tp) == 9


async def test_a_producer_out_of_step_with_the_broker_is_replaced_and_the_next_one_commits(broker):
    """A broker that lost a producer's sequence (a stall, a failover) answers every later send
    OutOfOrderSequenceNumber: the batch aborts, the producer is replaced instead of retried for good,
    and the partition, still held, commits its next batch with the new one."""
    tp, sink, group = await stage_topics(broker)
    transactions = transactions_of(broker, group)
    async with publishing(broker.bootstrap) as publisher:
        await transactions.hold({tp})
        try:
            async with transactions.transaction(tp, 1) as transaction:
                await publisher.send_all(one(sink, b"first"), Batch(transaction))
            producer = transactions._producers[tp]
            producer._txn_manager.increment_sequence_number(TopicPartition(sink, 0), 7)  # out of step
            with pytest.raises(OutOfOrderSequenceNumber):
                async with transactions.transaction(tp, 2) as transaction:
                    await publisher.send_all(one(sink, b"out of step"), Batch(transaction))
            async with transactions.transaction(tp, 2) as transaction:
                await publisher.send_all(one(sink, b"after"), Batch(transaction))
            assert transactions._producers[tp] is not producer
        finally:
            await transactions.close()
    assert await committed_values(broker.bootstrap, sink) == [b"first", b"after"]
    assert await committed_offset(broker.bootstrap, group, tp) == 2


async def test_a_producer_whose_sender_stopped_is_replaced_in_place_and_the_next_batch_commits(
    broker, monkeypatch
):
    """A broker that answers a transaction's offset commit InvalidTxnState (seen after it stalled)
    stops aiokafka's sender for good: the batch aborts, a new producer takes the partition at once
    (fencing the stopped one), and the next batch commits with no rebalance of the group."""
    tp, sink, group = await stage_topics(broker)
    transactions = transactions_of(broker, group)
    async with publishing(broker.bootstrap) as publisher:
        await transactions.hold({tp})
        try:
            await one_record_batch(transactions, publisher, tp, 1, sink, b"first")
            stopped = transactions._producers[tp]

            def refused(*_: object) -> None:
                raise InvalidTxnState()

            monkeypatch.setattr(TxnOffsetCommitHandler, "handle_response", refused)
            with pytest.raises(KafkaError):
                await one_record_batch(transactions, publisher, tp, 2, sink, b"lost")
            monkeypatch.undo()
            await one_record_batch(transactions, publisher, tp, 2, sink, b"after")
            assert transactions._producers[tp] is not stopped
        finally:
            await transactions.close()
    assert await committed_values(broker.bootstrap, sink) == [b"first", b"after"]
    assert await committed_offset(broker.bootstrap, group, tp) == 2


async def test_the_next_holder_of_a_partition_fences_the_last_and_only_its_batches_count(broker):
    tp, sink, group = await stage_topics(broker)
    stalled = transactions_of(broker, group)
    successor = transactions_of(broker, group)
    sleeper = transactions_of(broker, group)
    async with publishing(broker.bootstrap) as publisher:
        await stalled.hold({tp})
        try:

            async def batch_while_the_partition_moves() -> None:
                async with stalled.transaction(tp, 3) as transaction:
                    await publisher.send_all(one(sink, b"zombie"), Batch(transaction))
                    await successor.hold({tp})

            with pytest.raises(FencedError):
                await batch_while_the_partition_moves()
            await one_record_batch(successor, publisher, tp, 3, sink, b"successor")
            with pytest.raises(NotHeldError):  # once fenced, it has let the partition go
                await one_record_batch(stalled, publisher, tp, 4, sink, b"zombie again")
            await sleeper.hold({tp})
            await successor.release({tp})
            await successor.hold({tp})  # the partition moved while `sleeper` had no batch in hand
            with pytest.raises(FencedError):
                await one_record_batch(sleeper, publisher, tp, 4, sink, b"zombie again")
            await one_record_batch(successor, publisher, tp, 4, sink, b"successor again")
        finally:
            for holder in (stalled, successor, sleeper):
                await holder.close()
    assert await committed_values(broker.bootstrap, sink) == [b"successor", b"successor again"]
    assert await committed_offset(broker.bootstrap, group, tp) == 4


async def test_a_broker_without_transactions_fails_the_probe(broker):
    if broker.kind != "tansu":
        pytest.skip("the embedded broker is the one without transactions")
    transactions = transactions_of(broker, uuid4().hex)
    with pytest.raises(BrokerError, match="transactional producer"):
        await transactions.probe()


async def test_work_a_batch_starts_without_its_handle_sends_outside_the_batchs_transaction(broker):
    tp, sink, group = await stage_topics(broker)
    transactions = transactions_of(broker, group)
    async with publishing(broker.bootstrap) as publisher:
        await transactions.hold({tp})
        try:

            async def batch_starting_a_fetch() -> None:
                async with transactions.transaction(tp, 1) as transaction:
                    await publisher.send_all(one(sink, b"in the batch"), Batch(transaction))
                    await asyncio.create_task(publisher.send_all(one(sink, b"a report")))
                    raise RuntimeError("the batch fails after starting it")

            with pytest.raises(RuntimeError):
                await batch_starting_a_fetch()
        finally:
            await transactions.close()
    assert await committed_values(broker.bootstrap, sink) == [b"a report"]


async def test_a_transaction_left_open_takes_the_next_batches_and_commits_them_with_the_last_offset(broker):
    tp, sink, group = await stage_topics(broker)
    transactions = transactions_of(broker, group)
    folded: list[int] = []
    ended: list[int] = []
    async with publishing(broker.bootstrap) as publisher:
        await transactions.hold({tp})
        try:
            for offset in (3, 7):
                async with transactions.transaction(tp, offset, keep_open=True) as transaction:
                    await publisher.send_all(one(sink, f"batch {offset}".encode()), Batch(transaction))
                    await Batch(transaction).after_commit(lambda offset=offset: _note(folded, offset))  # type: ignore[misc]
                    Batch(transaction).when_ended(lambda offset=offset: ended.append(offset))  # type: ignore[misc]
            assert transactions.is_open(tp)
            assert (folded, ended) == ([], [])
            async with transactions.transaction(
                tp, None, keep_open=True
            ) as transaction:  # a part handed over: no offset
                await publisher.send_all(one(sink, b"handed over"), Batch(transaction))
            await transactions.end(tp)
            assert not transactions.is_open(tp)
            await transactions.end(tp)  # nothing left open: nothing to do
        finally:
            await transactions.close()
    assert (folded, ended) == ([3, 7], [3, 7])
    assert await committed_values(broker.bootstrap, sink) == [b"batch 3", b"batch 7", b"handed over"]
    assert await committed_offset(broker.bootstrap, group, tp) == 7


async def test_a_failing_batch_aborts_the_batches_its_open_transaction_held(broker):
    tp, sink, group = await stage_topics(broker)
    transactions = transactions_of(broker, group)
    folded: list[int] = []
    async with publishing(broker.bootstrap) as publisher:
        await transactions.hold({tp})
        try:
            async with transactions.transaction(tp, 4, keep_open=True) as transaction:
                await publisher.send_all(one(sink, b"held"), Batch(transaction))
                await Batch(transaction).after_commit(lambda: _note(folded, 4))
            with pytest.raises(RuntimeError):
                async with transactions.transaction(tp, 9, keep_open=True) as transaction:
                    raise RuntimeError("the next batch fails")
            assert not transactions.is_open(tp)
            await one_record_batch(transactions, publisher, tp, 4, sink, b"handled again")
        finally:
            await transactions.close()
    assert folded == []
    assert await committed_values(broker.bootstrap, sink) == [b"handled again"]
    assert await committed_offset(broker.bootstrap, group, tp) == 4


async def test_a_transaction_left_open_when_the_partition_moves_is_fenced_and_nothing_of_it_counts(broker):
    tp, sink, group = await stage_topics(broker)
    stalled = transactions_of(broker, group)
    successor = transactions_of(broker, group)
    ended: list[str] = []
    async with publishing(broker.bootstrap) as publisher:
        await stalled.hold({tp})
        try:
            async with stalled.transaction(tp, 2, keep_open=True) as transaction:
                await publisher.send_all(one(sink, b"zombie"), Batch(transaction))
                Batch(transaction).when_ended(lambda: ended.append("zombie"))
            await successor.hold({tp})
            with pytest.raises(FencedError):
                await stalled.end(tp)
            await one_record_batch(successor, publisher, tp, 2, sink, b"successor")
        finally:
            for holder in (stalled, successor):
                await holder.close()
    assert ended == ["zombie"]
    assert await committed_values(broker.bootstrap, sink) == [b"successor"]
    assert await committed_offset(broker.bootstrap, group, tp) == 2


async def test_a_commit_cancelled_after_the_partition_moved_counts_the_fence_and_stays_cancelled(broker):
    """A revocation cancels a commit the broker then answers with a fence: the fence is counted, the
    partition let go, the cancellation is what the batch sees, and no answer is left unread."""
    tp, sink, group = await stage_topics(broker)
    counters: Counter[str] = Counter()
    stalled = transactions_of(broker, group, counters)
    successor = transactions_of(broker, group)
    unread: list[object] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: unread.append(context.get("exception")))
    async with publishing(broker.bootstrap) as publisher:
        await stalled.hold({tp})
        try:
            async with stalled.transaction(tp, 2, keep_open=True) as transaction:
                await publisher.send_all(one(sink, b"zombie"), Batch(transaction))
            await successor.hold({tp})
            commit = asyncio.create_task(stalled.end(tp))
            while not stalled_sent_its_offsets(stalled, tp):  # noqa: ASYNC110 - aiokafka sets no event
                await asyncio.sleep(0)
            commit.cancel()
            with pytest.raises(asyncio.CancelledError):
                await commit
            with pytest.raises(NotHeldError):
                await one_record_batch(stalled, publisher, tp, 3, sink, b"zombie again")
            await one_record_batch(successor, publisher, tp, 2, sink, b"successor")
        finally:
            for holder in (stalled, successor):
                await holder.close()
            await asyncio.sleep(0.5)
            gc.collect()
            loop.set_exception_handler(None)
    assert counters["transactions.fenced"] == 1, counters
    assert unread == []
    assert await committed_values(broker.bootstrap, sink) == [b"successor"]


def stalled_sent_its_offsets(holder: PartitionTransactions, tp: TopicPartition) -> bool:
    """Whether the commit of `tp` waits for the broker's answer to its offsets."""
    producer = holder._producers[tp]
    return bool(producer._txn_manager._pending_txn_offsets)
