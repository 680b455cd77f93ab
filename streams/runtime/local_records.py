"""Records a stage hands another stage of this worker instead of publishing them, and their settling:
a sender learns whether its record was handled, or left (its partition moved) for it to publish."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from schemas.codec import encode
from streams.broker.headers import Headers


class LocalRecord:
    """A decoded record handed over inside this worker: no offset, encoded only if it must be
    dead-lettered."""

    __slots__ = ("decoded", "headers", "key", "partition", "replies", "taken", "timestamp", "topic")
    offset = -1

    def __init__(
        self,
        topic: str,
        partition: int,
        key: bytes,
        decoded: Any,
        timestamp_ms: int,
        headers: Headers = (),
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.key = key
        self.decoded = decoded
        self.timestamp = timestamp_ms
        self.headers = headers
        self.replies: list[Any] = []  # what the stage asks its sender to publish with its input (answers)
        self.taken: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    @property
    def value(self) -> bytes:
        return encode(self.decoded)

    def settle(self, taken: bool) -> None:
        if not self.taken.done():
            self.taken.set_result(taken)


def settle_local(records: Iterable[Any], taken: bool) -> None:
    for record in records:
        if isinstance(record, LocalRecord):
            record.settle(taken)
