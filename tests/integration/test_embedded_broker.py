"""The embedded broker: it starts, serves Kafka, stops; and the compatibility layer is needed."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from schemas.codec import decode, encode
from schemas.commands import SubmitJob
from schemas.records import Request
from streams.broker.compat import EMBEDDED_TANSU, KAFKA, end_offsets
from streams.broker.embedded import EmbeddedBroker
from streams.errors import BrokerError

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
        bootstrap_servers=bootstrap, linger_ms=200, **EMBEDDED_TANSU.producer_options()
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
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        **EMBEDDED_TANSU.consumer_options(),
    )
    await consumer.start()
    try:
        record = await asyncio.wait_for(consumer.getone(), 30)
    finally:
        await consumer.stop()
    assert decode(record.value) == submitted


async def test_end_offsets_count_every_record_of_one_batch(broker):
    topic = await create_topic(broker.bootstrap)
    await produce_one_batch(broker.bootstrap, topic, [b"r%d" % i for i in range(10)])
    partition = TopicPartition(topic, 0)
    assert await end_offsets(broker.bootstrap, [partition], EMBEDDED_TANSU) == {partition: 10}


async def test_list_offsets_alone_undercounts_one_batch_on_the_embedded_broker(broker):
    # Proves the end-offset correction necessary: without it recovery would stop at 1 of 10.
    topic = await create_topic(broker.bootstrap)
    await produce_one_batch(broker.bootstrap, topic, [b"r%d" % i for i in range(10)])
    partition = TopicPartition(topic, 0)
    assert await end_offsets(broker.bootstrap, [partition], KAFKA) == {partition: 1}


async def test_end_offsets_of_an_empty_partition_are_zero(broker):
    topic = await create_topic(broker.bootstrap)
    partition = TopicPartition(topic, 0)
    assert await end_offsets(broker.bootstrap, [partition], EMBEDDED_TANSU) == {partition: 0}


async def test_idempotent_producer_cannot_start_on_the_embedded_broker(broker):
    # Proves enable_idempotence=False necessary for the embedded broker.
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, **KAFKA.producer_options())
    try:
        with pytest.raises(KafkaError):
            await asyncio.wait_for(producer.start(), 20)
    finally:
        await producer.stop()


async def _first_record_with(
    bootstrap: str, topic: str, session_timeout_ms: int, wait_s: float
) -> bytes | None:
    options = EMBEDDED_TANSU.consumer_options() | {"session_timeout_ms": session_timeout_ms}
    options["rebalance_timeout_ms"] = max(session_timeout_ms, EMBEDDED_TANSU.rebalance_timeout_ms)
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


async def test_group_member_joins_promptly_with_the_short_session_timeout(broker):
    topic = await create_topic(broker.bootstrap)
    await produce_one_batch(broker.bootstrap, topic, [b"hello"])
    assert (
        await _first_record_with(broker.bootstrap, topic, EMBEDDED_TANSU.session_timeout_ms, 15) == b"hello"
    )


async def test_group_member_with_a_long_session_timeout_is_held_back(broker):
    # Proves the short session timeout necessary: the broker holds the first join for session/2.
    topic = await create_topic(broker.bootstrap)
    await produce_one_batch(broker.bootstrap, topic, [b"hello"])
    assert await _first_record_with(broker.bootstrap, topic, 40_000, 10) is None


async def test_broker_stops_and_leaves_no_process():
    embedded = EmbeddedBroker()
    await embedded.start()
    pid = embedded.pid
    assert pid is not None
    embedded.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_port_already_served_is_a_clear_error(broker):
    taken = EmbeddedBroker(port=broker.port)
    with pytest.raises(BrokerError, match="already in use"):
        await taken.start()
    assert taken.pid is None
