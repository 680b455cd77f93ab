"""Writes encoded records to Kafka and waits until the broker has them (acks=all).

`send_all` groups the records per topic-partition into as few record batches as fit, hands them
over together and awaits the acks once: a stage's whole output is one produce round trip.
A record's timestamp is the time of what it says: the lifecycle decides a command at the
timestamp of the command's record, so a redelivered command decides the same.
"""

from __future__ import annotations

import asyncio
import functools
import struct
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from aiokafka.errors import KafkaError, MessageSizeTooLargeError
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.producer.message_accumulator import BatchBuilder

from schemas.codec import encode
from schemas.types import Record, uuid_text
from streams.broker.access import KafkaAccess
from streams.broker.compat import MAX_BATCH_BYTES, BrokerProfile, new_producer, shielded, start_whole
from streams.broker.headers import Headers
from streams.errors import BrokerError
from streams.runtime.commit_order import OUTSIDE, Batch

COMPRESS_FROM_BYTES = 2048  # a smaller batch (a lone job's records) saves little and costs ~40 µs a hop
CODECS = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # a record batch's compression attribute
MURMUR2_M = 0x5BD1E995
MURMUR2_SEED = 0x9747B28C
MISSING_TOPIC_WAIT_S = 5.0  # a topic created a moment ago reaches every broker's metadata within it
_PARTITIONER = DefaultPartitioner()


@dataclass(frozen=True)
class Outgoing:
    topic: str
    key: bytes
    value: bytes
    partition: int | None = None
    timestamp_ms: int | None = None
    headers: Headers = ()
    tombstone: bool = False  # no value at all: removes the key from a compacted topic
    record: Record | None = field(default=None, compare=False)  # what `value` encodes, as made here

    @property
    def payload(self) -> bytes | None:
        return None if self.tombstone else self.value


@functools.lru_cache(maxsize=65_536)
@functools.lru_cache(maxsize=1 << 16)  # a job's key is placed once for each of its records
def partition_of(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a keyed record (murmur2, as in Java clients)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


@functools.cache
def _words(count: int) -> struct.Struct:
    return struct.Struct(f"<{count}I")


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (unsigned), a whole key's 4-byte words read at once: half the time of aiokafka's."""
    length = len(data)
    h = MURMUR2_SEED ^ length
    for word in _words(length >> 2).unpack_from(data):
        k = (word * MURMUR2_M) & 0xFFFFFFFF
        k = ((k ^ (k >> 24)) * MURMUR2_M) & 0xFFFFFFFF
        h = ((h * MURMUR2_M) & 0xFFFFFFFF) ^ k
    tail = length & 3
    if tail:
        base = length - tail
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h = ((h ^ data[base]) * MURMUR2_M) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * MURMUR2_M) & 0xFFFFFFFF
    return h ^ (h >> 15)


@dataclass(frozen=True)
class Written:
    """Where the broker put a record."""

    topic: str
    partition: int
    offset: int


def tombstone(topic: str, key: bytes, partition: int | None = None) -> Outgoing:
    return Outgoing(topic, key, b"", partition, tombstone=True)


def outgoing(
    topic: str,
    key: str | bytes | UUID,
    record: Record,
    partition: int | None = None,
    at: datetime | None = None,
) -> Outgoing:
    """An encoded record; a UUID key is written in its canonical text form."""
    raw_key = (
        uuid_text(key).encode() if isinstance(key, UUID) else key.encode() if isinstance(key, str) else key
    )
    timestamp_ms = None if at is None else int(at.timestamp() * 1000)
    return Outgoing(topic, raw_key, encode(record), partition, timestamp_ms, record=record)


def _append(batch: Any, message: Outgoing, topic: str) -> None:
    if message.headers:
        appended = batch.append(
            key=message.key,
            value=message.payload,
            timestamp=message.timestamp_ms,
            headers=list(message.headers),
        )
    else:
        appended = batch.append(key=message.key, value=message.payload, timestamp=message.timestamp_ms)
    if appended is None:  # a full batch drops the record: never silently
        raise MessageSizeTooLargeError(f"a batch for {topic} could not take its record")


class Sink(Protocol):
    """Where agents send records; `Publisher` is the Kafka implementation."""

    async def send_all(self, messages: Sequence[Outgoing], batch: Batch = OUTSIDE) -> list[Any]: ...


class Publisher:
    def __init__(
        self,
        kafka: KafkaAccess,
        profile: BrokerProfile,
        counters: Counter[str] | None = None,
        public_topics: Collection[str] = (),
    ) -> None:
        self._kafka = kafka
        self._bootstrap = kafka.bootstrap
        self._counters: Counter[str] = Counter() if counters is None else counters
        self._idempotent = profile.enable_idempotence
        self._codec = CODECS[profile.compression_type]
        self._public_codec = CODECS[profile.public_compression_type]
        self._public = frozenset(public_topics)
        self._producer = new_producer(kafka, profile, partitioner=_PARTITIONER)
        # With a schema registry: what consumers read, in its framing (`streams/runtime/schema_registry.py`).
        self.framing: Callable[[Sequence[Outgoing]], Sequence[Outgoing]] | None = None
        self._stopped = False

    async def start(self) -> None:
        try:
            await start_whole(self._producer.start, self._producer.stop)
        except KafkaError as exc:
            await self._producer.stop()
            raise BrokerError(self._why(exc)) from exc

    def _why(self, exc: KafkaError) -> str:
        """What went wrong, and which setting to change: a broker that answered, but cannot give an
        idempotent producer, is the embedded one run with the `kafka` profile."""
        if self._idempotent and self._producer.client.cluster.brokers():
            return (
                f"the broker at {self._bootstrap} answered, but refused an idempotent producer ({exc!r}): "
                "it is the embedded broker (tansu), which needs SCRAPESTREAM_BROKER_PROFILE=embedded"
            )
        return f"cannot reach Kafka at {self._bootstrap}: {exc}"

    async def stop(self) -> None:
        self._stopped = True
        await self._producer.stop()

    async def reachable(self, timeout_s: float) -> bool:
        """Whether a broker answers a metadata request now (not from cached metadata); never once
        stopped: a stopped aiokafka client would open a connection nothing closes."""
        if self._stopped:
            return False
        try:
            async with asyncio.timeout(timeout_s):
                await self._producer.client.fetch_all_metadata()
        except (KafkaError, TimeoutError, OSError):
            return False
        return True

    async def partitions(self, topic: str) -> int:
        """How many partitions `topic` has (from the producer's metadata); a topic that does not
        exist is a `BrokerError` naming it, within a few seconds (no client creates topics)."""
        known = self._producer.client.cluster.partitions_for_topic(topic)
        if known:
            return len(known)
        try:
            async with asyncio.timeout(MISSING_TOPIC_WAIT_S):
                return len(await shielded(self._producer.partitions_for(topic)))
        except TimeoutError as exc:
            raise BrokerError(
                f"topic {topic} does not exist at {self._bootstrap}: create the topics with "
                "`scrapestream topics create`, or check SCRAPESTREAM_TOPIC_PREFIX"
            ) from exc

    async def send_all(self, messages: Sequence[Outgoing], batch: Batch = OUTSIDE) -> list[Written]:
        """Send in order per partition (in `batch`'s transaction, if it has one); returns where each
        message landed, once all are acknowledged."""
        if self.framing is not None:
            messages = self.framing(messages)
        groups: dict[tuple[str, int], list[int]] = defaultdict(list)
        counts = {topic: await self.partitions(topic) for topic in {m.topic for m in messages}}
        for index, message in enumerate(messages):
            partition = message.partition
            if partition is None:
                partition = partition_of(message.key, counts[message.topic])
            groups[(message.topic, partition)].append(index)
        pending: list[tuple[asyncio.Future[Any], BatchBuilder, str, int, list[int]]] = []
        producer = batch.producer(self._producer)
        for (topic, partition), indexes in groups.items():
            for members, size in self._fitting_runs(messages, indexes):
                # aiokafka has no per-batch choice of compression, but takes any batch.
                codec = self._public_codec if topic in self._public else self._codec
                codec = codec if size >= COMPRESS_FROM_BYTES else CODECS[None]
                built = BatchBuilder(MAX_BATCH_BYTES, codec, is_transactional=batch.transactional)
                for index in members:
                    _append(built, messages[index], topic)
                future = await producer.send_batch(built, topic, partition=partition)
                pending.append((future, built, topic, partition, members))
                self._counters[f"produced.batches.{topic}"] += 1
                self._counters[f"produced.records.{topic}"] += len(members)
        written: list[Written | None] = [None] * len(messages)
        for future, built, topic, partition, members in pending:
            base = (await future).offset
            self._counters[f"produced.bytes.{topic}"] += built.size()  # built by now: compressed
            for position, index in enumerate(members):
                written[index] = Written(topic, partition, base + position)
            batch.wrote(topic, partition, base + len(members) - 1)
        return [w for w in written if w is not None]

    def _fitting_runs(self, messages: Sequence[Outgoing], indexes: list[int]) -> list[tuple[list[int], int]]:
        """Consecutive runs of `indexes` that fit one record batch each, with their sizes."""
        runs: list[tuple[list[int], int]] = [([], 0)]
        for index in indexes:
            message = messages[index]
            length = (
                len(message.key) + len(message.value) + 64 + sum(len(k) + len(v) for k, v in message.headers)
            )
            if length > MAX_BATCH_BYTES:
                raise MessageSizeTooLargeError(f"a record of {length} bytes exceeds {MAX_BATCH_BYTES}")
            members, size = runs[-1]
            if size + length > MAX_BATCH_BYTES and members:
                members, size = [], 0
                runs.append((members, size))
            members.append(index)
            runs[-1] = (members, size + length)
        return runs
