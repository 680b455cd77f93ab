"""What scrapestream does differently when it talks to the embedded tansu broker, and only then.

Each setting answers one measured defect of tansu 0.6.0 (docs/BROKER.md):
1. ListOffsets(LATEST) answers the last batch's base offset + 1: end offsets are re-read
   from the high watermark of a Fetch at the reported offset.
2. InitProducerId fails: the idempotent producer is off (scrapestream is at-least-once anyway).
3. The first JoinGroup is held for half the session timeout: short group timeouts.
4. A waiting Fetch is not cut short when data arrives: a short fetch wait while records flow,
   a longer one once the consumer has been idle for a while (`FetchPacer`), so an idle worker
   costs the broker and itself little and the first record after a pause waits one long poll.
   After a small poll the worker lets its stages write their outputs before it fetches again,
   so a record one stage hands to the next is in that fetch rather than one wait later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from schemas.errors import ScrapestreamError
from streams.broker.access import KafkaAccess
from streams.broker.clients import kafka_consumer, kafka_producer

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_BATCH_BYTES = 1_000_000  # under the broker's default message.max.bytes (1,048,588)


@dataclass(frozen=True)
class BrokerProfile:
    """Client tuning that depends on which broker is on the other end."""

    name: str
    enable_idempotence: bool
    session_timeout_ms: int
    heartbeat_interval_ms: int
    rebalance_timeout_ms: int
    fetch_max_wait_ms: int
    end_offsets_from_fetch: bool
    idle_fetch_max_wait_ms: int = 0
    settle_before_fetch_ms: int = 0
    isolation_level: str = "read_committed"  # no reader sees what an aborted transaction wrote
    compression_type: str | None = "zstd"  # of each record batch: a batch of a job's records shrinks fourfold
    # Of the topics outside clients read: gzip is the one codec every mainstream client reads unaided.
    public_compression_type: str | None = "gzip"

    def producer_options(self) -> dict[str, Any]:
        return {
            "enable_idempotence": self.enable_idempotence,
            "acks": "all",
            "compression_type": self.compression_type,
        }

    def consumer_options(self) -> dict[str, Any]:
        return {
            "session_timeout_ms": self.session_timeout_ms,
            "heartbeat_interval_ms": self.heartbeat_interval_ms,
            "fetch_max_wait_ms": self.fetch_max_wait_ms,
            "isolation_level": self.isolation_level,
        }


KAFKA = BrokerProfile(
    name="kafka",
    enable_idempotence=True,
    session_timeout_ms=45_000,
    heartbeat_interval_ms=3_000,
    rebalance_timeout_ms=60_000,
    fetch_max_wait_ms=500,
    end_offsets_from_fetch=False,
)

EMBEDDED_TANSU = BrokerProfile(
    name="embedded-tansu",
    enable_idempotence=False,
    session_timeout_ms=6_000,
    heartbeat_interval_ms=1_000,
    rebalance_timeout_ms=3_000,
    fetch_max_wait_ms=5,
    end_offsets_from_fetch=True,
    idle_fetch_max_wait_ms=500,
    settle_before_fetch_ms=10,
    isolation_level="read_uncommitted",  # no transactions there
)

IDLE_AFTER_S = 2.0
FINISH_CANCELLED_START_S = 5.0
TOPICS_VISIBLE_WITHIN_S = 30.0


class FetchPacer:
    """Sets a consumer's fetch wait from what it sees: short while records flow, long when idle."""

    def __init__(
        self, consumer: AIOKafkaConsumer, profile: BrokerProfile, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._consumer = consumer
        self._clock = clock
        self._busy_ms = profile.fetch_max_wait_ms
        self._idle_ms = max(profile.idle_fetch_max_wait_ms, profile.fetch_max_wait_ms)
        self._quiet_since: float | None = None

    def observed(self, records: int) -> None:
        """Called after each poll with the number of records it returned."""
        now = self._clock()
        if records:
            self._quiet_since = None
            self._set(self._busy_ms)
        elif self._quiet_since is None:
            self._quiet_since = now
        elif now - self._quiet_since > IDLE_AFTER_S:
            self._set(self._idle_ms)

    def _set(self, wait_ms: int) -> None:
        fetcher = getattr(self._consumer, "_fetcher", None)  # aiokafka reads it for every fetch request
        if fetcher is not None:
            fetcher._fetch_max_wait_ms = wait_ms


def new_producer(kafka: KafkaAccess, profile: BrokerProfile, **options: Any) -> AIOKafkaProducer:
    """A producer for whole record batches of up to `MAX_BATCH_BYTES`, sent as soon as they are handed
    over (aiokafka's default batch holds 16 KiB, and a record that does not fit is not appended)."""
    return kafka_producer(
        kafka,
        linger_ms=0,
        max_batch_size=MAX_BATCH_BYTES,
        max_request_size=MAX_BATCH_BYTES,
        **profile.producer_options(),
        **options,
    )


async def start_whole(start: Callable[[], Awaitable[None]], stop: Callable[[], Awaitable[Any]]) -> None:
    """Runs an aiokafka client's `start` to its end even when cancelled, then `stop`s it and lets the
    cancellation through: aiokafka leaks the bootstrap connection of a start cancelled halfway. A start
    that has not ended `FINISH_CANCELLED_START_S` after its cancellation (a consumer waiting for a
    topic that does not exist) is past its bootstrap: it is cancelled then."""
    starting = asyncio.ensure_future(start())
    try:
        await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            async with asyncio.timeout(FINISH_CANCELLED_START_S):
                await starting
        await stop()
        raise


async def shielded(request: Awaitable[T]) -> T:
    """Await an aiokafka request that goes on when its caller is cancelled (cancelling it halfway leaves
    a connection unclosed or an answer unread): cancelled, the caller leaves it to end alone and its
    answer, a failure too, is still read."""
    pending = asyncio.ensure_future(request)
    pending.add_done_callback(lambda done: done.cancelled() or done.exception())
    return await asyncio.shield(pending)


async def refresh_metadata(consumer: AIOKafkaConsumer) -> None:
    """A fresh look at the cluster's topics for `partitions_for_topic`: aiokafka's `topics()` does not
    refresh what that reads, and no public call does."""
    await consumer._client.force_metadata_update()


async def partitions_known(consumer: AIOKafkaConsumer, topics: Iterable[str]) -> list[TopicPartition]:
    """Every partition of `topics`, once the cluster's metadata shows each of them (a topic created a
    moment ago may not be in every broker's metadata yet); those it shows after a bounded wait."""
    topics = list(topics)
    loop = asyncio.get_running_loop()
    give_up_at = loop.time() + TOPICS_VISIBLE_WITHIN_S
    while True:
        with contextlib.suppress(KafkaError):
            await refresh_metadata(consumer)
        unseen = [topic for topic in topics if not consumer.partitions_for_topic(topic)]
        if not unseen or loop.time() > give_up_at:
            if unseen:
                log.warning("topics %s are not in the cluster's metadata yet", unseen)
            return [
                TopicPartition(topic, partition)
                for topic in topics
                for partition in sorted(consumer.partitions_for_topic(topic) or ())
            ]
        await asyncio.sleep(0.2)


async def end_offsets(
    kafka: KafkaAccess, partitions: Iterable[TopicPartition], profile: BrokerProfile
) -> dict[TopicPartition, int]:
    """The offset after the last record of each partition (defect 1 corrected when needed)."""
    wanted = list(partitions)
    consumer = kafka_consumer(
        kafka,
        enable_auto_commit=False,
        fetch_max_wait_ms=10,
        max_partition_fetch_bytes=1024,
        isolation_level=profile.isolation_level,  # the last stable offset when reading committed
    )
    try:
        await start_whole(consumer.start, consumer.stop)
        reported: dict[TopicPartition, int] = await consumer.end_offsets(wanted)
        if not profile.end_offsets_from_fetch:
            return reported
        return await _high_watermarks(consumer, reported)
    finally:
        await consumer.stop()


async def _high_watermarks(
    consumer: AIOKafkaConsumer, reported: dict[TopicPartition, int]
) -> dict[TopicPartition, int]:
    consumer.assign(list(reported))
    for partition, offset in reported.items():
        consumer.seek(partition, max(offset - 1, 0))
    corrected = dict(reported)
    pending = set(reported)
    for _ in range(50):
        await consumer.getmany(*pending, timeout_ms=100)
        for partition in list(pending):
            highwater = consumer.highwater(partition)
            if highwater is not None:
                corrected[partition] = max(highwater, reported[partition])
                pending.discard(partition)
        if not pending:
            break
    return corrected


class LogGapError(ScrapestreamError):
    """The log no longer holds records a reader needs (retention removed them)."""


async def records_between(
    kafka: KafkaAccess,
    partition: TopicPartition,
    start: int | None,
    end: int,
    batch: int = 2_000,
    isolation_level: str = "read_uncommitted",
) -> AsyncGenerator[list[ConsumerRecord[bytes, bytes]], None]:
    """The records of `partition` from offset `start` (None: its first retained one) up to `end`, in
    batches; `LogGapError` when the partition no longer starts at or before `start`."""
    consumer = kafka_consumer(
        kafka,
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=8 * 1024 * 1024,
        isolation_level=isolation_level,
    )
    try:
        await start_whole(consumer.start, consumer.stop)
        consumer.assign([partition])
        first = (await consumer.beginning_offsets([partition]))[partition]
        if start is not None and first > start:
            raise LogGapError(
                f"{partition.topic} partition {partition.partition} starts at offset {first}, but is"
                f" needed from {start}: the records in between are past the topic's retention"
            )
        consumer.seek(partition, first if start is None else start)
        # The consumer's position, not the last offset seen: a gap (compaction, retention) cannot stall it.
        while await consumer.position(partition) < end:
            fetched = await consumer.getmany(partition, timeout_ms=500, max_records=batch)
            # Up to `end` exactly: a replay compared with a store must stop where that store stopped.
            records = [record for record in fetched.get(partition, []) if record.offset < end]
            if records:
                yield records
    finally:
        await consumer.stop()
