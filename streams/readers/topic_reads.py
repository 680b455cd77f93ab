"""Reading a deployment's topics as an outside client does: consumers of no group that read what is
asked (a job's partition from its start, the completions from a time), each stopped when its reader
leaves, their fetch wait growing while nothing comes."""

from __future__ import annotations

import weakref
from collections.abc import AsyncGenerator, Callable
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from schemas.codec import decode_or_none
from streams.broker.access import KafkaAccess
from streams.broker.clients import kafka_consumer
from streams.broker.compat import BrokerProfile, FetchPacer, end_offsets, refresh_metadata, start_whole
from streams.errors import BrokerError
from streams.runtime.publisher import partition_of
from streams.runtime.schema_registry import SchemaRegistry

T = TypeVar("T")


class TopicReads:
    def __init__(
        self, kafka: KafkaAccess, profile: BrokerProfile, prefix: str, registry: SchemaRegistry | None
    ) -> None:
        self._kafka = kafka
        self._profile = profile
        self._prefix = prefix
        self._registry = registry
        # Readers a caller left unfinished (a `break` out of `completions()`) are stopped on exit.
        self._readers: weakref.WeakSet[AIOKafkaConsumer] = weakref.WeakSet()

    async def stop(self) -> None:
        for reader in list(self._readers):
            await reader.stop()

    def consumer(self, *topics: str, **options: Any) -> AIOKafkaConsumer:
        consumer = kafka_consumer(
            self._kafka,
            *topics,
            enable_auto_commit=False,
            fetch_max_wait_ms=self._profile.fetch_max_wait_ms,
            isolation_level=self._profile.isolation_level,  # never a completion an aborted transaction wrote
            **options,
        )
        self._readers.add(consumer)
        return consumer

    async def records(self, consumer: AIOKafkaConsumer) -> AsyncGenerator[ConsumerRecord[bytes, bytes], None]:
        """Every record the consumer reads, for good; its fetch wait grows once nothing comes, so an
        idle reader costs the broker and this process little."""
        pacer = FetchPacer(consumer, self._profile)
        while True:
            polled = await consumer.getmany(timeout_ms=1_000)
            pacer.observed(sum(len(records) for records in polled.values()))
            if self._registry is not None:
                await self._registry.learn(record.value for records in polled.values() for record in records)
            for records in polled.values():
                for record in records:
                    yield record

    async def seek_to_time(
        self, consumer: AIOKafkaConsumer, partitions: list[TopicPartition], since: datetime
    ) -> None:
        """Each partition at its first record written at or after `since` (its end if there is none)."""
        found = await consumer.offsets_for_times({tp: int(since.timestamp() * 1000) for tp in partitions})
        ends = await end_offsets(self._kafka, partitions, self._profile)
        for partition in partitions:
            at = found.get(partition)
            # Nothing that late: Kafka answers none; the embedded broker offset 0 with timestamp -1.
            late = at is None or at.timestamp < 0
            consumer.seek(partition, ends[partition] if late or at is None else at.offset)

    async def first(
        self, job_ids: tuple[UUID, ...], topics: tuple[str, ...], found: Callable[[Any], T | None]
    ) -> T:
        """The first record of these jobs for which `found` gives a value.

        Reads each job's partition of each topic from its start, so what was published before the
        call is found too.
        """
        keys = {str(job_id).encode() for job_id in job_ids}
        consumer = self.consumer()
        try:
            await start_whole(consumer.start, consumer.stop)
            await refresh_metadata(consumer)
            # Past the first topic, only those the cluster shows this principal (ACLs hide the others).
            readable = [
                topics[0],
                *(name for name in topics[1:] if consumer.partitions_for_topic(f"{self._prefix}.{name}")),
            ]
            partitions = list(
                {
                    partition_of_key(consumer, f"{self._prefix}.{name}", key)
                    for name in readable
                    for key in keys
                }
            )
            consumer.assign(partitions)
            for partition in partitions:
                consumer.seek(partition, 0)
            async for record in self.records(consumer):
                if record.key in keys and (decoded := decode_or_none(record.value)) is not None:
                    value = found(decoded)
                    if value is not None:
                        return value
        finally:
            await consumer.stop()
        raise AssertionError("unreachable: a consumer never ends")


def partition_of_key(consumer: AIOKafkaConsumer, topic: str, key: bytes) -> TopicPartition:
    """The partition Kafka's default partitioner gives `key`, as every scrapestream producer uses."""
    partitions = partitions_of(consumer, topic)
    return TopicPartition(topic, partition_of(key, len(partitions)))


def partitions_of(consumer: AIOKafkaConsumer, topic: str) -> list[TopicPartition]:
    partitions = sorted(consumer.partitions_for_topic(topic) or ())
    if not partitions:
        raise BrokerError(
            f"topic {topic} does not exist: create the topics with `scrapestream topics create` (a "
            "worker with SCRAPESTREAM_CREATE_TOPICS does), or check SCRAPESTREAM_TOPIC_PREFIX"
        )
    return [TopicPartition(topic, number) for number in partitions]
