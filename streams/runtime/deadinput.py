"""Input nobody can use goes to the dead-input topic with its original bytes and the reason.

The original bytes are kept up to `MAX_KEPT_BYTES`, so a dead-input record always fits where
the original did; a longer original is cut and the reason says so.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from projections.lifecycle.limits import clip
from schemas.errors import CodecError
from schemas.work import DeadInput
from streams.clock import utc_now
from streams.runtime.commit_order import OUTSIDE, Batch
from streams.runtime.failures import waiting_for
from streams.runtime.publisher import Outgoing, Sink, outgoing
from streams.settings import Settings

log = logging.getLogger(__name__)
MAX_KEPT_BYTES = 512 * 1024
MAX_KEY_BYTES = 4 * 1024
RETRY_DELAY_S = 1.0
T = TypeVar("T")
R = TypeVar("R")


class UnusableError(Exception):
    """A record its stage cannot use, for the reason given (its dead-input record says it)."""


class DeadLetters:
    def __init__(self, settings: Settings, publisher: Sink, counters: Counter[str]) -> None:
        self._settings = settings
        self._publisher = publisher
        self._counters = counters

    def record(
        self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None, reason: str
    ) -> Outgoing:
        """The dead-input record for one unusable input record (counted and logged)."""
        log.warning("dead input at %s/%d@%d: %s", topic, partition, offset, reason)
        self._counters[f"dead_input.{topic}"] += 1
        original = value or b""
        if len(original) > MAX_KEPT_BYTES:
            reason = f"{reason} (original of {len(original)} bytes cut to {MAX_KEPT_BYTES})"
        record = DeadInput(
            source_topic=topic,
            partition=partition,
            offset=offset,
            key=None if key is None else key[:MAX_KEY_BYTES],
            value=original[:MAX_KEPT_BYTES],
            reason=clip(reason, 4_096),
            received_at=utc_now(),
        )
        return outgoing(self._settings.topic("dead-input"), (key or b"")[:MAX_KEY_BYTES], record)

    def of(self, record: Any, reason: str) -> Outgoing:
        """The dead-input record for a consumed Kafka record."""
        return self.record(record.topic, record.partition, record.offset, record.key, record.value, reason)

    def sort_out(
        self,
        records: Iterable[R],
        read: Callable[[R], T],
        what: str,
        dead_of: Callable[[R, str], list[Outgoing]] | None = None,
    ) -> tuple[list[tuple[R, T]], list[Outgoing]]:
        """The records `read` can use, each with what it read; for each other one, what `dead_of`
        makes of it and the reason (`undecodable {what}: …`, or the one `UnusableError` gave): by default
        its dead-input record."""
        usable: list[tuple[R, T]] = []
        dead: list[Outgoing] = []
        for record in records:
            try:
                usable.append((record, read(record)))
                continue
            except CodecError as exc:
                reason = f"undecodable {what}: {exc}"
            except UnusableError as exc:
                reason = str(exc)
            dead += [self.of(record, reason)] if dead_of is None else dead_of(record, reason)
        return usable, dead

    async def send(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        reason: str,
        batch: Batch = OUTSIDE,
    ) -> None:
        """Publish one dead-input record (in `batch`), waiting out infrastructure failures."""
        message = self.record(topic, partition, offset, key, value, reason)
        while True:
            try:
                await self._publisher.send_all([message], batch)
                return
            except Exception as exc:
                what = waiting_for(exc)
                if what is None:
                    log.error(
                        "dead input at %s/%d@%d could not be published: %s", topic, partition, offset, exc
                    )
                    return
                log.warning("dead input waits for %s (%s)", what, exc)
                await asyncio.sleep(RETRY_DELAY_S)
