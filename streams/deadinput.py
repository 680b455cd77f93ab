"""Input nobody can use goes to the dead-input topic with its original bytes and the reason."""

from __future__ import annotations

import logging
from collections import Counter

from schemas.work import DeadInput
from streams.clock import utc_now
from streams.publisher import Sink, outgoing
from streams.settings import Settings

log = logging.getLogger(__name__)


class DeadLetters:
    def __init__(self, settings: Settings, publisher: Sink, counters: Counter[str]) -> None:
        self._settings = settings
        self._publisher = publisher
        self._counters = counters

    async def send(
        self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None, reason: str
    ) -> None:
        log.warning("dead input at %s/%d@%d: %s", topic, partition, offset, reason)
        record = DeadInput(
            source_topic=topic,
            partition=partition,
            offset=offset,
            key=key,
            value=value or b"",
            reason=reason,
            received_at=utc_now(),
        )
        await self._publisher.send(outgoing(self._settings.topic("dead-input"), key or b"", record))
        self._counters[f"dead_input.{topic}"] += 1
