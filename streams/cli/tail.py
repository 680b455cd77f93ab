"""`scrapestream tail TOPIC`: any topic's records decoded for a person at a terminal (or as JSON lines).

A topic is named by its kind (`completions`, `answers`, `dead-input`, …: the deployment's prefix is
added) or in full. Each record shows where it is, its key and headers, and its value decoded in
either framing (a registry's ids fetched when `SCRAPESTREAM_SCHEMA_REGISTRY_URL` is set); a value
nothing decodes is shown as such, with its first bytes, and the tail goes on.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from schemas.codec import decode
from schemas.errors import CodecError
from streams.broker.clients import kafka_consumer
from streams.broker.compat import end_offsets, refresh_metadata, start_whole
from streams.broker.refusals import admitted
from streams.cli.terminal import printable
from streams.errors import UsageError
from streams.runtime.schema_registry import SchemaRegistry
from streams.settings import TOPIC_NAMES, Settings

SHOWN_BYTES = 32


def topic_named(settings: Settings, name: str) -> str:
    return settings.topic(name) if name in TOPIC_NAMES else name


async def tail(settings: Settings, arguments: argparse.Namespace) -> int:
    topic = topic_named(settings, arguments.topic)
    registry = SchemaRegistry.of(settings)
    await admitted(settings.kafka_access)
    consumer = kafka_consumer(
        settings.kafka_access,
        enable_auto_commit=False,
        isolation_level=settings.client_profile.isolation_level,
    )
    try:
        await start_whole(consumer.start, consumer.stop)
        await refresh_metadata(consumer)
        known = consumer.partitions_for_topic(topic)
        if not known:
            raise UsageError(
                f"no topic {topic} at {settings.kafka_bootstrap} (`scrapestream topics describe`)"
            )
        partitions = [TopicPartition(topic, partition) for partition in sorted(known)]
        consumer.assign(partitions)
        ends = await end_offsets(settings.kafka_access, partitions, settings.client_profile)
        if arguments.from_beginning:
            await consumer.seek_to_beginning(*partitions)
        else:
            await consumer.seek_to_end(*partitions)
        await _follow(consumer, registry, arguments, ends)
    finally:
        await consumer.stop()
        if registry is not None:
            await registry.close()
    return 0


async def _follow(
    consumer: AIOKafkaConsumer,
    registry: SchemaRegistry | None,
    arguments: argparse.Namespace,
    ends: dict[TopicPartition, int],
) -> None:
    shown = 0
    while arguments.count is None or shown < arguments.count:
        if arguments.until_end and await _at_end(consumer, ends):
            return
        polled = await consumer.getmany(timeout_ms=500)
        records = [record for batch in polled.values() for record in batch]
        if registry is not None:
            await registry.learn(record.value for record in records)
        for record in records:
            if arguments.count is not None and shown >= arguments.count:
                return
            document = shown_record(record)
            sys.stdout.write((json.dumps(document) if arguments.json else _line(document)) + "\n")
            shown += 1
        sys.stdout.flush()


async def _at_end(consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int]) -> bool:
    return all([await consumer.position(partition) >= end for partition, end in ends.items()])


def shown_record(record: ConsumerRecord[bytes, bytes]) -> dict[str, Any]:
    """One record as a person reads it: where, when, key, headers and the decoded value (or why not)."""
    document: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": datetime.fromtimestamp(record.timestamp / 1000, UTC).isoformat(timespec="milliseconds"),
        "key": None if record.key is None else record.key.decode("utf-8", "replace"),
        "headers": {name: value.decode("utf-8", "replace") for name, value in record.headers or ()},
    }
    if record.value is None:
        return document | {"record": None, "value": None}
    try:
        decoded = decode(record.value)
    except CodecError as exc:
        return document | {"record": None, "error": str(exc), "bytes": record.value[:SHOWN_BYTES].hex()}
    return document | {"record": type(decoded).__name__, "value": msgspec.to_builtins(decoded)}


def _line(document: dict[str, Any]) -> str:
    """One record for a terminal: whatever a producer put in its key, headers or error is escaped."""
    where = f"{document['topic']}/{document['partition']}@{document['offset']} {document['timestamp']}"
    headers = "".join(
        f" {printable(name)}={printable(value[:80])}" for name, value in document["headers"].items()
    )
    head = f"{where} key={printable(str(document['key']))}{headers}"
    if "error" in document:
        return f"{head}\n  undecodable: {printable(document['error'])} (starts {document['bytes']})"
    if document["record"] is None:
        return f"{head}\n  tombstone"
    return f"{head}\n  {document['record']} {json.dumps(document['value'])}"
