"""The response cache as every worker sees it: all of `scrapestream.cache`, folded into a local store.

Entries are written by the lifecycles as consequences of attempts (`projections.lifecycle.cache`),
keyed by request identity on a compacted topic; each worker reads every partition from where its
store left off (a global table, as Faust's GlobalTable and Kafka Streams' GlobalKTable are), so a
job on any partition sees an entry made on any other, once this worker has read it (within a
fetch of it being written).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from projections.storage.base import KeyValueStore
from schemas.codec import decode_as
from schemas.errors import CodecError
from schemas.work import CacheEntry
from streams.broker.compat import BrokerProfile, FetchPacer

log = logging.getLogger(__name__)
ENTRY = b"e/"
OFFSET = b"o/"
MAX_RECORDS = 2_000
RETRY_S = 1.0


class CacheTable:
    def __init__(self, bootstrap: str, topic: str, profile: BrokerProfile, store: KeyValueStore) -> None:
        self._topic = topic
        self._store = store
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=profile.fetch_max_wait_ms
        )
        self._pacer = FetchPacer(self._consumer, profile)
        self._task: asyncio.Task[None] | None = None
        self.entries_read = 0

    async def start(self) -> None:
        await self._consumer.start()
        await self._consumer.topics()
        partitions = [
            TopicPartition(self._topic, partition)
            for partition in sorted(self._consumer.partitions_for_topic(self._topic) or ())
        ]
        self._consumer.assign(partitions)
        unread = []
        for tp in partitions:
            stored = self._store.get(OFFSET + str(tp.partition).encode())
            if stored is None:
                unread.append(tp)
            else:
                self._consumer.seek(tp, int(stored))
        if unread:
            await self._consumer.seek_to_beginning(*unread)
        self._task = asyncio.create_task(self._follow(), name="cache-table")

    def get(self, request_hash: str) -> CacheEntry | None:
        value = self._store.get(ENTRY + request_hash.encode())
        return None if value is None else decode_as(value, CacheEntry)

    async def _follow(self) -> None:
        while True:
            try:
                polled = await self._consumer.getmany(timeout_ms=1_000, max_records=MAX_RECORDS)
            except KafkaError as exc:
                log.warning("reading %s failed (%s); retrying", self._topic, exc)
                await asyncio.sleep(RETRY_S)
                continue
            self._pacer.observed(sum(len(records) for records in polled.values()))
            changes: dict[bytes, bytes | None] = {}
            for tp, records in polled.items():
                for record in records:
                    changes.update(self._change(record.key, record.value))
                changes[OFFSET + str(tp.partition).encode()] = str(records[-1].offset + 1).encode()
            if changes:
                self._store.write(changes)

    def _change(self, key: bytes | None, value: bytes | None) -> dict[bytes, bytes | None]:
        if not key:
            return {}
        if value is None:
            return {ENTRY + key: None}  # a tombstone: the entry is gone
        try:
            decode_as(value, CacheEntry)
        except CodecError as exc:
            log.warning("skipping an undecodable cache entry for %r: %s", key[:64], exc)
            return {}
        self.entries_read += 1
        return {ENTRY + key: value}

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._consumer.stop()
        self._store.close()
