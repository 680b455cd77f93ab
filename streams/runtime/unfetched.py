"""Per partition, the offset its consumer must fetch to before a record may be handed over to its
stage: one handed over never passes one on the topic (the log at assignment, or one published since
instead of handed over), since it would be decided before them."""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, TopicPartition

from streams.runtime.publisher import Written


class Unfetched:
    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self._consumer = consumer
        self._ends: dict[TopicPartition, int] = {}

    def blocks(self, tp: TopicPartition) -> bool:
        return tp in self._ends

    def published(self, written: Iterable[Written]) -> None:
        """Records a sender published instead of handing them over."""
        for where in written:
            tp = TopicPartition(where.topic, where.partition)
            self._ends[tp] = max(self._ends.get(tp, 0), where.offset + 1)

    async def assigned(self, assigned: set[TopicPartition]) -> None:
        """The assigned partitions that hold records not yet fetched, up to where."""
        ends = await self._consumer.end_offsets(list(assigned))
        for tp, end in ends.items():
            if await self._consumer.position(tp) < end:
                self._ends[tp] = max(self._ends.get(tp, 0), end)

    async def fetched(self) -> None:
        """Partitions whose consumer fetched past what it had to take hand-overs again: queued behind
        those records, a record handed over is decided after them."""
        for tp, end in list(self._ends.items()):
            if tp not in self._consumer.assignment() or await self._consumer.position(tp) >= end:
                self._ends.pop(tp, None)

    def forget(self, tp: TopicPartition) -> None:
        self._ends.pop(tp, None)
