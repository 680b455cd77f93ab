"""Writes encoded records to Kafka and waits until the broker has them (acks=all).

A record's timestamp is the time of what it says: the lifecycle decides a command at the
timestamp of the command's record, so a redelivered command decides the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from schemas.codec import encode
from schemas.types import Record
from streams.broker.compat import BrokerProfile
from streams.errors import BrokerError


@dataclass(frozen=True)
class Outgoing:
    topic: str
    key: bytes
    value: bytes
    partition: int | None = None
    timestamp_ms: int | None = None


def outgoing(
    topic: str, key: str | bytes, record: Record, partition: int | None = None, at: datetime | None = None
) -> Outgoing:
    raw_key = key.encode() if isinstance(key, str) else key
    timestamp_ms = None if at is None else int(at.timestamp() * 1000)
    return Outgoing(topic, raw_key, encode(record), partition, timestamp_ms)


class Sink(Protocol):
    """Where agents send records; `Publisher` is the Kafka implementation."""

    async def send_all(self, messages: Sequence[Outgoing]) -> list[Any]: ...


class Publisher:
    def __init__(self, bootstrap: str, profile: BrokerProfile) -> None:
        self._bootstrap = bootstrap
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, linger_ms=1, max_batch_size=512 * 1024, **profile.producer_options()
        )

    async def start(self) -> None:
        try:
            await self._producer.start()
        except KafkaError as exc:
            await self._producer.stop()
            raise BrokerError(f"cannot reach Kafka at {self._bootstrap}: {exc}") from exc

    async def stop(self) -> None:
        await self._producer.stop()

    async def send_all(self, messages: Sequence[Outgoing]) -> list[Any]:
        """Send in order; returns each message's record metadata once acknowledged."""
        pending = [
            await self._producer.send(
                m.topic, m.value, key=m.key, partition=m.partition, timestamp_ms=m.timestamp_ms
            )
            for m in messages
        ]
        return list(await asyncio.gather(*pending))
