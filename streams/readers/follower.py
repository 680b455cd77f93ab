"""What every reader that follows topics for good shares: its consumer, the task that follows, one
way to poll through a Kafka outage, and one way to stop."""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

log = logging.getLogger(__name__)
RETRY_S = 1.0


class TopicFollower:
    _consumer: AIOKafkaConsumer
    _task: asyncio.Task[None] | None = None

    @property
    def task(self) -> asyncio.Task[None] | None:
        return self._task

    async def stop(self) -> None:
        try:
            if self._task is not None:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)  # a dead reader stops too
        finally:
            try:
                await self._consumer.stop()
            finally:
                self._closed()

    def _closed(self) -> None:
        """Releases what the reader keeps besides its consumer (its store)."""


async def poll_or_wait(
    consumer: AIOKafkaConsumer, max_records: int, what: str
) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
    """One poll of a reader that follows topics for good; nothing, after a pause, when Kafka fails."""
    try:
        polled: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = await consumer.getmany(
            timeout_ms=1_000, max_records=max_records
        )
        return polled
    except KafkaError as exc:
        log.warning("reading %s failed (%s); retrying", what, exc)
        await asyncio.sleep(RETRY_S)
        return {}
