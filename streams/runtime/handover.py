"""Records a worker's stages send each other (the executor's reports and the outbox's callback outcomes
for the lifecycle, the lifecycle's due work for the executor): handed to the stage in this process
that reads the record's partition when this worker holds it, published otherwise. One handed over
but left unhandled (its partition moved first) is published then, so the partition's new holder
reads it."""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from schemas.types import Record
from streams.broker.headers import Headers
from streams.runtime.flusher import Flusher
from streams.runtime.publisher import Outgoing, Written, outgoing


class Handed(Protocol):
    """A record handed over (`streams.runtime.consumer.LocalRecord`): whether the receiving stage
    handled it, and what it asks the sender to publish then."""

    @property
    def taken(self) -> asyncio.Future[bool]: ...

    @property
    def replies(self) -> list[Outgoing]: ...


class LocalStages(Protocol):
    """The worker's consumer: whether a stage of this worker reads a record's partition, and the
    hand-over itself (a future of whether it was handled, None when it must be published)."""

    def takes(self, topic: str, key: bytes) -> bool: ...

    def hand_over(
        self, topic: str, key: bytes, decoded: Any, timestamp_ms: int, headers: Headers = ()
    ) -> Handed | None: ...

    def published(self, written: Iterable[Written]) -> None: ...


class Handover:
    def __init__(self, flusher: Flusher, kind: str, counters: Counter[str] | None = None) -> None:
        self._flusher = flusher
        self._kind = kind  # counted as `<kind>.handed_over`, `.published`, `.handed_back`
        self._counters: Counter[str] = Counter() if counters is None else counters
        self._left: set[asyncio.Task[bool]] = set()
        self.local: LocalStages | None = None  # the worker's consumer, once it runs

    def takes(self, topic: str, key: bytes) -> bool:
        return self.local is not None and self.local.takes(topic, key)

    async def deliver(
        self, topic: str, key: bytes, record: Record, at: datetime, what: str, headers: Headers = ()
    ) -> None:
        """Hand over or publish `record`, decided at `at`; waits out broker failures when publishing."""
        local = self.local
        timestamp_ms = int(at.timestamp() * 1000)
        handed = None if local is None else local.hand_over(topic, key, record, timestamp_ms, headers)
        if handed is None:
            self._counters[f"{self._kind}.published"] += 1
            message = outgoing(topic, key, record, at=at)
            await self._flusher.deliver(replace(message, headers=headers) if headers else message, what)
            return
        self._counters[f"{self._kind}.handed_over"] += 1
        left = functools.partial(outgoing, topic, key, record, at=at)  # encoded only if handed back
        handed.taken.add_done_callback(lambda _: self._after(handed, left, headers, what))

    def _after(self, handed: Handed, left: Callable[[], Outgoing], headers: Headers, what: str) -> None:
        """Publish what the stage replied, or the record itself when the stage left it."""
        if handed.taken.result():
            messages = handed.replies
        else:
            self._counters[f"{self._kind}.handed_back"] += 1
            messages = [replace(left(), headers=headers) if headers else left()]
        for message in messages:
            task = asyncio.create_task(self._flusher.deliver(message, what))
            self._left.add(task)
            task.add_done_callback(self._left.discard)

    async def close(self) -> None:
        """Wait until every record left by a moved partition, and every reply, is published."""
        while self._left:
            await asyncio.gather(*self._left, return_exceptions=True)
