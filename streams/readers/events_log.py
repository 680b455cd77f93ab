"""The events topic folded into a lifecycle store: how a lifecycle catches up a partition it adopts,
and how `scrapestream replay` rebuilds a store."""

from __future__ import annotations

import contextlib
import logging

from aiokafka import ConsumerRecord, TopicPartition

from projections.jobstore import JobStore, decode_event
from schemas.errors import CodecError
from schemas.events import Event
from streams.broker.compat import records_between
from streams.settings import Settings

log = logging.getLogger(__name__)


async def fold_log(
    settings: Settings, events_partition: TopicPartition, start: int | None, end: int, store: JobStore
) -> int:
    """Fold the events of one partition from offset `start` (None: its first retained one) to `end`
    into `store`, in log order."""
    folded = 0
    reading = records_between(
        settings.kafka_access,
        events_partition,
        start,
        end,
        isolation_level=settings.client_profile.isolation_level,
    )
    async with contextlib.aclosing(reading):  # a failed commit stops the reader now, not at GC
        async for records in reading:
            events, values = _decoded(records)
            store.commit(
                events_partition.partition, events, next_offset=records[-1].offset + 1, encoded=values
            )
            folded += len(records)
    if store.events_offset(events_partition.partition) < end:  # past the last transaction's marker
        store.commit(events_partition.partition, [], next_offset=end)
    return folded


def _decoded(records: list[ConsumerRecord[bytes, bytes]]) -> tuple[list[Event], list[bytes]]:
    """The events of `records` and their bytes; an event that cannot be decoded is logged and skipped."""
    events, values = [], []
    for record in records:
        try:
            events.append(decode_event(record.value or b""))
        except CodecError as exc:
            log.error(
                "events %d@%d cannot be decoded and is skipped: %s", record.partition, record.offset, exc
            )
            continue
        values.append(record.value)
    return events, values
