"""Partitions held back from fetching, each for the reasons given (backpressure, settling, the commit
order taking them, a stage catching up): fetched again once no reason is left."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, TopicPartition


class Pauses:
    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self._consumer = consumer
        self._held: dict[TopicPartition, set[str]] = defaultdict(set)

    def owns(self, partition: TopicPartition) -> bool:
        return partition in self._consumer.assignment()

    def hold(self, partitions: Iterable[TopicPartition], reason: str) -> None:
        held = [tp for tp in partitions if self.owns(tp)]
        for tp in held:
            self._held[tp].add(reason)
        self._consumer.pause(*held)

    def release(self, partitions: Iterable[TopicPartition], reason: str) -> None:
        free = []
        for tp in partitions:
            self._held[tp].discard(reason)
            if not self._held[tp] and self.owns(tp):
                free.append(tp)
        self._consumer.resume(*free)

    def forget(self, tp: TopicPartition) -> None:
        self._held.pop(tp, None)
