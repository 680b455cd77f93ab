"""The brokers themselves: each serves Kafka; each workaround of `streams/broker/compat.py` is
needed on the embedded tansu (its proving test shows the defect there) and not on Apache Kafka
(the same test shows the defect absent there)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from schemas.codec import decode, encode
from schemas.commands import SubmitJob
from schemas.records import Request
from streams.broker.compat import KAFKA, end_offsets
from streams.broker.embedded import EmbeddedBroker
from streams.errors import BrokerError
from streams.runtime.publisher import Outgoing, Publisher
from streams.settings import load_settings
from tests.brokers import profile

pytestmark = pytest.mark.broker


async def create_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"test-{uuid4().hex[:10]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()
    return name


async def produce_one_batch(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=200, **profile(bootstrap).producer_options()
    )
    await producer.start()
    try:
        pending = [await producer.send(topic, value, partition=0) for value in values]
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


async def test_an_encoded_submit_job_round_trips_through_the_broker(broker):
    topic = await create_topic(broker.bootstrap)
    submitted = SubmitJob(
        caller_identity="svc-a",
        request=Request(url="https://example.com/"),
        deadline_at=datetime(2030, 1, 1, tzinfo=UTC) + timedelta(microseconds=1500),
        labels={"team": "crawl"},
    )
    await produce_one_batch(broker.bootstrap, topic, [encode(submitted)])
    (value,) = await read_values(broker, topic, 1)
    assert decode(value) == submitted


async def read_values(broker, topic: str, count: int) -> list[bytes]:  # type: ignore[no-untyped-def]
    """The first `count` values of partition 0 of `topic`, as the broker's profile reads them."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        **broker.profile.consumer_options(),
    )
    await consumer.start()
    try:
        read: list[bytes] = []
        while len(read) < count:
            polled = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
            read += [record.value for records in polled.values() for record in records]
        return read
    finally:
        await consumer.stop()


@pytest.mark.parametrize("compression", ["zstd", "lz4", "gzip", "snappy", "none"])
async def test_a_publishers_compressed_batch_reads_back_whole_and_counts_its_bytes_on_the_wire(
    broker, compression
):
    topic = await create_topic(broker.bootstrap)
    chosen = load_settings(broker_profile=broker.profile_name, compression=compression).client_profile
    counters: Counter[str] = Counter()
    publisher = Publisher(broker.access, chosen, counters)
    values = [encode(SubmitJob(caller_identity="svc-a", request=Request(url=f"https://example.com/{n}"),
                               deadline_at=datetime(2030, 1, 1, tzinfo=UTC))) for n in range(50)]  # fmt: skip
    await publisher.start()
    try:
        await publisher.send_all([Outgoing(topic, b"k", values[0], partition=0)])
        alone = counters[f"produced.bytes.{topic}"]  # a batch too small to gain: sent as it is
        await publisher.send_all([Outgoing(topic, b"k", value, partition=0) for value in values[1:]])
    finally:
        await publisher.stop()
    assert await read_values(broker, topic, len(values)) == values
    raw = sum(map(len, values[1:]))
    assert alone > len(values[0])
    if compression == "none":
        assert counters[f"produced.bytes.{topic}"] - alone > raw
    else:
        assert counters[f"produced.bytes.{topic}"] - alone < raw / 2


async def test_end_offsets_count_every_record_of_one_batch(broker):
    topic = await create_topic(broker.bootstrap)
    await produce_one_batch(broker.bootstrap, topic, [b"r%d" % i for i in range(10)])
    partition = TopicPartition(topic, 0)
    assert await end_offsets(broker.access, [partition], broker.profile) == {partition: 10}


async def test_list_offsets_alone_gives_the_end_only_on_kafka(broker):
    # Workaround 1: tansu answers the last batch's base offset + 1, so recovery would stop at 1 of
    # 10 without the correction; Kafka's answer is the end itself.
    topic = await create_topic(broker.bootstrap)
    await produce_one_batch(broker.bootstrap, topic, [b"r%d" % i for i in range(10)])
    partition = TopicPartition(topic, 0)
    expected = 10 if broker.kind == "kafka" else 1
    assert await end_offsets(broker.access, [partition], KAFKA) == {partition: expected}


async def test_end_offsets_of_an_empty_partition_are_zero(broker):
    topic = await create_topic(broker.bootstrap)
    partition = TopicPartition(topic, 0)
    assert await end_offsets(broker.access, [partition], broker.profile) == {partition: 0}


async def test_an_idempotent_producer_starts_only_on_kafka(broker):
    # Workaround 2: tansu refuses InitProducerId, so the embedded profile turns idempotence off.
    topic = await create_topic(broker.bootstrap)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, **KAFKA.producer_options())
    try:
        if broker.kind == "kafka":
            await producer.start()
            await producer.send_and_wait(topic, b"once")
        else:
            with pytest.raises(KafkaError):
                await asyncio.wait_for(producer.start(), 20)
    finally:
        await producer.stop()


async def test_asking_for_a_topic_nobody_created_never_creates_it(broker):
    """Both brokers auto-create a topic a metadata request names (Kafka's default
    `auto.create.topics.enable`): scrapestream's clients never ask them to, and say what is missing."""
    missing = f"test-missing-{uuid4().hex[:8]}"
    publisher = Publisher(broker.access, profile(broker.bootstrap))
    await publisher.start()
    try:
        with pytest.raises(BrokerError, match=f"topic {missing} does not exist.*scrapestream topics create"):
            await publisher.send_all([Outgoing(missing, b"key", b"nobody provisioned this")])
    finally:
        await publisher.stop()
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        assert missing not in await admin.list_topics()
    finally:
        await admin.close()


async def test_a_publisher_says_whether_a_broker_answers_and_once_stopped_asks_none(broker):
    """A stopped aiokafka client would open a connection for the probe and leave it to the garbage
    collector: a stopped publisher answers without one."""
    publisher = Publisher(broker.access, profile(broker.bootstrap))
    await publisher.start()
    try:
        assert await publisher.reachable(5.0)
    finally:
        await publisher.stop()
    assert not await publisher.reachable(5.0)


async def zombie_write(producer: AIOKafkaProducer, topic: str) -> None:
    await producer.begin_transaction()
    await producer.send_and_wait(topic, b"zombie")
    await producer.commit_transaction()


async def test_transactions_commit_abort_and_fence_a_zombie_only_on_kafka(broker):
    """What exactly-once processing would rest on: offsets committed with the records, aborted
    records invisible to `read_committed` readers, a second producer of the same transactional id
    fencing the first. Apache Kafka does all of it; tansu cannot start a transactional producer."""
    source, sink = await create_topic(broker.bootstrap), await create_topic(broker.bootstrap)
    transactional_id, group = f"stage-{uuid4().hex[:8]}", f"g-{uuid4().hex[:8]}"
    first = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=transactional_id)
    if broker.kind == "tansu":
        with pytest.raises(KafkaError):
            await asyncio.wait_for(first.start(), 20)
        await first.stop()
        return
    await first.start()
    second = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=transactional_id)
    try:
        async with first.transaction():
            await first.send(sink, b"committed")
            await first.send_offsets_to_transaction({TopicPartition(source, 0): 7}, group)
        await first.begin_transaction()
        await first.send(sink, b"aborted")
        await first.abort_transaction()
        await second.start()  # the same id: `first` is a zombie from here on
        with pytest.raises(KafkaError):
            await zombie_write(first, sink)
        async with second.transaction():
            await second.send(sink, b"after")
    finally:
        await second.stop()
        with contextlib.suppress(KafkaError):
            await first.stop()
    reader = AIOKafkaConsumer(
        sink,
        bootstrap_servers=broker.bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
    )
    await reader.start()
    try:
        polled = await reader.getmany(timeout_ms=5_000)
        assert [record.value for records in polled.values() for record in records] == [b"committed", b"after"]
    finally:
        await reader.stop()
    offsets = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group)
    await offsets.start()
    try:
        assert await offsets.committed(TopicPartition(source, 0)) == 7
    finally:
        await offsets.stop()


async def _first_record_with(
    bootstrap: str, topic: str, session_timeout_ms: int, wait_s: float
) -> bytes | None:
    options = profile(bootstrap).consumer_options() | {"session_timeout_ms": session_timeout_ms}
    options["rebalance_timeout_ms"] = max(session_timeout_ms, profile(bootstrap).rebalance_timeout_ms)
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"g-{uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        **options,
    )

    async def first_record() -> bytes:
        await consumer.start()
        return bytes((await consumer.getone()).value)

    first = asyncio.ensure_future(first_record())
    try:
        done, _ = await asyncio.wait({first}, timeout=wait_s)
        return first.result() if done else None
    finally:
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        await consumer.stop()


async def test_group_member_joins_promptly_with_its_profiles_session_timeout(broker):
    topic = await create_topic(broker.bootstrap)
    await produce_one_batch(broker.bootstrap, topic, [b"hello"])
    joined = await _first_record_with(broker.bootstrap, topic, broker.profile.session_timeout_ms, 15)
    assert joined == b"hello"


async def test_a_long_session_timeout_holds_the_first_join_back_only_on_tansu(broker):
    # Workaround 3: tansu holds the first join for session/2; Kafka (initial rebalance delay 0) does not.
    topic = await create_topic(broker.bootstrap)
    await produce_one_batch(broker.bootstrap, topic, [b"hello"])
    joined = await _first_record_with(broker.bootstrap, topic, 40_000, 10)
    assert joined == (b"hello" if broker.kind == "kafka" else None)


async def test_a_waiting_fetch_is_answered_when_data_arrives_only_on_kafka(broker):
    # Workaround 4: tansu answers a waiting fetch only when its wait ends, so the embedded profile
    # waits briefly while records flow; Kafka answers as soon as the record is there.
    topic = await create_topic(broker.bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=8_000)
    await consumer.start()
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        await consumer.getmany(timeout_ms=100)  # a fetch is now waiting at the broker
        await produce_one_batch(broker.bootstrap, topic, [b"now"])
        polled = await consumer.getmany(timeout_ms=1_500)
    finally:
        await consumer.stop()
    answered = [record.value for records in polled.values() for record in records]
    assert answered == ([b"now"] if broker.kind == "kafka" else [])


async def test_broker_stops_and_leaves_no_process():
    embedded = EmbeddedBroker()
    await embedded.start()
    pid = embedded.pid
    assert pid is not None
    embedded.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_port_already_served_is_a_clear_error(broker):
    if broker.kind != "tansu":
        pytest.skip("the embedded broker's own start: nothing to show on Kafka")
    taken = EmbeddedBroker(port=int(broker.bootstrap.rsplit(":", 1)[1]))
    with pytest.raises(BrokerError, match="already in use"):
        await taken.start()
    assert taken.pid is None
