"""The batch consumer on the real broker: what it retries, what it isolates, what it commits."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaConnectionError

from streams.runtime import transactions
from streams.runtime.commit_order import OUTSIDE, Batch
from streams.runtime.consumer import QuietStage, StageConsumer
from streams.runtime.deadinput import DeadLetters
from streams.runtime.local_records import LocalRecord
from streams.runtime.publisher import Outgoing, Publisher
from streams.runtime.routing import Routing, RoutingAssignor
from streams.runtime.transactions import PartitionTransactions
from tests.brokers import fresh_topics
from tests.e2e.conftest import Observer


class Recording(QuietStage):
    """Handles records by remembering their values; some values make it fail."""

    name = "recording"
    max_batch = 50

    def __init__(self, topic: str, broker_outages: int = 0) -> None:
        self.topics = frozenset({topic})
        self.handled: list[bytes] = []
        self.batches: list[int] = []
        self.recoveries = 0
        self._outages = broker_outages
        self.expected = 0
        self.all_handled = asyncio.Event()

    async def handle(self, records: Sequence[Any], batch: Batch = OUTSIDE) -> None:
        if self._outages:
            self._outages -= 1
            raise KafkaConnectionError("broker away")
        if any(record.value == b"bug" for record in records):
            raise ValueError("this record breaks the stage")
        self.batches.append(len(records))
        self.handled += [record.value for record in records]
        if len(self.handled) >= self.expected:
            self.all_handled.set()

    async def recover(self, records: Sequence[Any]) -> None:
        self.recoveries += 1


async def run(broker, stage_for, values: list[bytes], later: Sequence[bytes] = ()):  # type: ignore[no-untyped-def]
    settings = await fresh_topics(broker)
    prefix = settings.topic_prefix
    topic = settings.topic("submit")
    await produce(broker, topic, values)
    publisher = Publisher(broker.access, broker.profile)
    await publisher.start()
    dead = await Observer(broker.access, settings.topic("dead-input")).start()
    stage = stage_for(topic)
    stage.expected = len([v for v in values if v != b"bug"])
    consumer = consumer_of(broker, settings, publisher, stage)
    await consumer.start()
    try:
        await asyncio.wait_for(stage.all_handled.wait(), 30)
        if later:
            stage.all_handled.clear()
            stage.expected += len(later)
            await produce(broker, topic, later)
            await asyncio.wait_for(stage.all_handled.wait(), 30)
        if b"bug" in values:
            await dead.wait_for(lambda records: bool(records))
    finally:
        await consumer.stop()
        await publisher.stop()
        await dead.stop()
    committed = await committed_offset(broker, prefix, topic)
    return stage, dead.records, committed


def consumer_of(broker, settings, publisher, stage, **options: Any) -> StageConsumer:  # type: ignore[no-untyped-def]
    """A stage consumer of the group named by the topics' prefix, dead-lettering through `publisher`."""
    dead_letters = DeadLetters(settings, publisher, Counter())
    return StageConsumer(
        broker.access, settings.topic_prefix, broker.profile, [stage], dead_letters, **options
    )


async def produce(broker, topic: str, values: Sequence[bytes]) -> None:  # type: ignore[no-untyped-def]
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    await producer.start()
    for value in values:
        await producer.send(topic, value)
    await producer.flush()
    await producer.stop()


async def committed_offset(broker, group: str, topic: str) -> int:
    from aiokafka import AIOKafkaConsumer

    probe = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    await probe.start()
    try:
        return int(await probe.committed(TopicPartition(topic, 0)) or 0)
    finally:
        await probe.stop()


@pytest.mark.timeout(60)
async def test_a_record_that_breaks_a_stage_goes_to_dead_input_and_the_rest_are_handled(broker):
    values = [f"r{n}".encode() for n in range(10)] + [b"bug"] + [f"s{n}".encode() for n in range(10)]
    stage, dead, committed = await run(broker, Recording, values)
    assert stage.handled == [v for v in values if v != b"bug"]
    (record,) = dead
    assert record.value == b"bug"
    assert "ValueError: this record breaks the stage" in record.reason
    assert committed == len(values)


@pytest.mark.timeout(60)
async def test_an_infrastructure_failure_retries_the_batch_after_recovery_and_skips_nothing(broker):
    values = [f"r{n}".encode() for n in range(10)]
    stage, dead, committed = await run(broker, lambda topic: Recording(topic, broker_outages=2), values)
    assert stage.handled == values
    assert stage.recoveries == 2
    assert dead == []
    assert committed == len(values)


class NeverSettles(Recording):
    """Its started work never finishes: the consumer must fetch again anyway."""

    async def settled(self) -> None:
        await asyncio.Event().wait()


@pytest.mark.timeout(60)
async def test_a_stage_whose_work_never_settles_still_gets_the_next_records(broker):
    first = [f"r{n}".encode() for n in range(5)]
    later = [f"s{n}".encode() for n in range(5)]
    stage, _, committed = await run(broker, NeverSettles, first, later)
    assert stage.handled == first + later
    assert committed == len(first + later)


class TakesOver(Recording):
    """Takes records handed over inside the worker; waits at `gate` while it is closed."""

    def __init__(self, topic: str) -> None:
        super().__init__(topic)
        self.gate = asyncio.Event()
        self.gate.set()

    def takes_over(self, partition: int) -> bool:
        return True

    async def handle(self, records: Sequence[Any], batch: Batch = OUTSIDE) -> None:
        await self.gate.wait()
        self.handled += [
            record.decoded if isinstance(record, LocalRecord) else record.value for record in records
        ]
        if len(self.handled) >= self.expected:
            self.all_handled.set()


@pytest.mark.timeout(60)
async def test_a_handed_over_record_is_handled_without_the_topic_and_one_a_revocation_leaves_is_given_back(
    broker,
):
    settings = await fresh_topics(broker)
    prefix = settings.topic_prefix
    topic = settings.topic("submit")
    await produce(broker, topic, [b"fetched"])
    publisher = Publisher(broker.access, broker.profile)
    await publisher.start()
    stage = TakesOver(topic)
    stage.expected = 1
    consumer = consumer_of(broker, settings, publisher, stage)
    await consumer.start()
    try:
        await asyncio.wait_for(stage.all_handled.wait(), 30)
        assert consumer.hand_over(settings.topic("events"), b"k", "nobody here reads it", 0) is None
        handed = consumer.hand_over(topic, b"k", "handed", 0)
        assert handed is not None
        assert await asyncio.wait_for(handed.taken, 30) is True
        assert stage.handled == [b"fetched", "handed"]

        stage.gate.clear()
        blocked = consumer.hand_over(topic, b"k", "in a batch when the partition goes", 0)
        await asyncio.sleep(0.5)  # its batch waits at the gate
        queued = consumer.hand_over(topic, b"k", "queued when the partition goes", 0)
        assert blocked is not None
        assert queued is not None
        revoking = asyncio.create_task(consumer.on_partitions_revoked({TopicPartition(topic, 0)}))
        assert (
            await asyncio.wait_for(queued.taken, 30) is False
        )  # its sender publishes it for the next holder
        stage.gate.set()
        await revoking
        assert await blocked.taken is True
        assert "queued when the partition goes" not in stage.handled
    finally:
        await consumer.stop()
        await publisher.stop()
    assert await committed_offset(broker, prefix, topic) == 1  # handed-over records have no offset


@pytest.mark.timeout(60)
async def test_no_record_is_handed_over_past_one_published_for_its_partition_before_it_is_fetched(broker):
    settings = await fresh_topics(broker)
    topic = settings.topic("submit")
    await produce(broker, topic, [b"fetched"])
    publisher = Publisher(broker.access, broker.profile)
    await publisher.start()
    stage = TakesOver(topic)
    stage.expected = 1
    consumer = consumer_of(broker, settings, publisher, stage)
    await consumer.start()
    try:
        await asyncio.wait_for(stage.all_handled.wait(), 30)
        stage.all_handled.clear()
        stage.expected = 3
        stage.gate.clear()  # what is fetched now waits to be handled
        consumer.published(await publisher.send_all([Outgoing(topic, b"k", b"published")]))
        assert consumer.hand_over(topic, b"k", "published after", 0) is None  # its sender publishes it
        stage.gate.set()
        handed = None
        for _ in range(300):  # once the published record is fetched, hand-overs queue behind it
            handed = consumer.hand_over(topic, b"k", "handed", 0)
            if handed is not None:
                break
            await asyncio.sleep(0.1)
        assert handed is not None
        assert await asyncio.wait_for(handed.taken, 30) is True
        assert stage.handled == [b"fetched", b"published", "handed"]
    finally:
        await consumer.stop()
        await publisher.stop()


class ClosesBehindTheFirst(TakesOver):
    """`TakesOver`, whose gate closes again behind the first record handed over."""

    def __init__(self, topic: str) -> None:
        super().__init__(topic)
        self.first_handled = asyncio.Event()

    async def handle(self, records: Sequence[Any], batch: Batch = OUTSIDE) -> None:
        await super().handle(records, batch)
        if "first" in self.handled and not self.first_handled.is_set():
            self.gate.clear()
            self.first_handled.set()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("span_s", [60.0, 0.0])
async def test_with_exactly_once_the_next_batch_joins_the_open_transaction_within_its_span(
    broker, monkeypatch, span_s
):
    """The first batch waits at a gate longer than the default span: the span is set per case."""
    if broker.kind != "kafka":
        pytest.skip("transactions need Apache Kafka")
    monkeypatch.setattr(transactions, "SPAN_S", span_s)
    settings = await fresh_topics(broker)
    prefix = settings.topic_prefix
    topic = settings.topic("submit")
    publisher = Publisher(broker.access, broker.profile)
    await publisher.start()
    ended: Counter[str] = Counter()
    stage = ClosesBehindTheFirst(topic)
    holder = PartitionTransactions(broker.access, broker.profile, prefix, ended)
    consumer = consumer_of(broker, settings, publisher, stage, transactions=holder)
    await consumer.start()
    try:
        await asyncio.wait_for(consumer.joined.wait(), 30)
        committed = ended["transactions.committed"]
        stage.gate.clear()
        first = consumer.hand_over(topic, b"k", "first", 0)
        await asyncio.sleep(0.2)  # its batch waits at the gate
        second = consumer.hand_over(topic, b"k", "second", 0)
        assert first is not None
        assert second is not None
        stage.gate.set()  # the first is handled; the second's batch waits at the gate, in its transaction
        await asyncio.wait_for(stage.first_handled.wait(), 30)
        await asyncio.sleep(0.2)
        if span_s:
            assert not first.taken.done()  # not committed yet: its sender must not count on it
            assert ended["transactions.committed"] == committed
        else:  # open past its span: committed before the next batch
            assert await asyncio.wait_for(first.taken, 30) is True
            assert ended["transactions.committed"] == committed + 1
        stage.gate.set()
        assert await asyncio.wait_for(first.taken, 30) is True
        assert await asyncio.wait_for(second.taken, 30) is True
        assert ended["transactions.committed"] == committed + (1 if span_s else 2)
    finally:
        stage.gate.set()
        await consumer.stop()
        await publisher.stop()
    assert stage.handled == ["first", "second"]


@pytest.mark.timeout(60)
@pytest.mark.kafka_only  # tansu numbers a group's generations its own way
async def test_a_member_joining_a_group_alone_takes_one_rebalance(broker):
    """aiokafka sends a JoinGroup per offered assignor, each with more protocols than the last: a
    member offering two made every rebalance a second one, and two such members could rebalance for
    good. A member offers the routing assignor alone."""
    settings = await fresh_topics(broker)
    publisher = Publisher(broker.access, broker.profile)
    await publisher.start()
    stage = Recording(settings.topic("submit"))
    routing = Routing("http://127.0.0.1:1")
    assignor = RoutingAssignor(routing, settings.topic("commands"))
    consumer = consumer_of(broker, settings, publisher, stage, assignor=assignor, routing=routing)
    await consumer.start()
    try:
        await asyncio.wait_for(consumer.joined.wait(), 30)
        generation = consumer._consumer._coordinator.generation  # aiokafka has no public call for it
    finally:
        await consumer.stop()
        await publisher.stop()
    assert generation == 1
    assert routing.generation == 1
