"""What each partition's stages have processed, and what of it the consumer group has committed:
marked per batch, committed every `COMMIT_EVERY_S` (or at once when asked), never past an offset
processed (under `exactly_once` the transactions commit them instead)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

log = logging.getLogger(__name__)
COMMIT_EVERY_S = 0.2


class Offsets:
    def __init__(self, consumer: AIOKafkaConsumer, commits: bool) -> None:
        self._consumer = consumer
        self._commits = commits  # false: each batch's offsets are committed with its transaction
        self._processed: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._due = asyncio.Event()

    def mark(self, batch: Iterable[Any]) -> None:
        """The records of `batch` are done (a record handed over inside the worker has no offset)."""
        last: dict[tuple[str, int], int] = {}
        for record in batch:
            if record.offset >= 0:
                last[(record.topic, record.partition)] = record.offset + 1
        for (topic, partition), offset in last.items():
            tp = TopicPartition(topic, partition)
            self._processed[tp] = max(self._processed.get(tp, 0), offset)
        if last:
            self._due.set()

    async def commit(self, only: set[TopicPartition] | None = None) -> None:
        if not self._commits:
            return
        assignment = self._consumer.assignment()
        due = {
            tp: offset
            for tp, offset in self._processed.items()
            if offset != self._committed.get(tp) and tp in assignment and (only is None or tp in only)
        }
        if due:
            await self._consumer.commit(due)
            self._committed.update(due)

    async def commit_quietly(self, only: set[TopicPartition] | None = None) -> None:
        try:
            await self.commit(only)
        except KafkaError as exc:
            log.info("offset commit failed (%s); the next one retries", exc)

    async def commit_periodically(self) -> None:
        while self._commits:
            await self._due.wait()  # an idle consumer does not wake to commit nothing
            await asyncio.sleep(COMMIT_EVERY_S)
            self._due.clear()
            await self.commit_quietly()
            if any(offset != self._committed.get(tp) for tp, offset in self._processed.items()):
                self._due.set()

    def lag(self) -> dict[tuple[str, int], int]:
        behind = {}
        for tp in self._consumer.assignment():
            highwater = self._consumer.highwater(tp)
            if highwater is not None:
                behind[(tp.topic, tp.partition)] = max(highwater - self._processed.get(tp, 0), 0)
        return behind

    def forget(self, tp: TopicPartition) -> None:
        self._processed.pop(tp, None)
        self._committed.pop(tp, None)
