"""The response cache as every worker sees it: all of `scrapestream.cache`, folded into a local store.

Entries are written by the lifecycles as consequences of attempts (`projections.lifecycle.cache`),
keyed by request identity on a compacted topic; each worker reads every partition from where its
store left off (a global table, as Faust's GlobalTable and Kafka Streams' GlobalKTable are), so a
job on any partition sees an entry made on any other once this worker has read it: within one
fetch wait of the table's consumer (250 ms with the embedded broker, 500 ms with Kafka).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from projections.storage.base import KeyValueStore, StoreError
from schemas.codec import decode_as
from schemas.errors import CodecError
from schemas.work import CacheEntry
from streams.broker.compat import BrokerProfile

log = logging.getLogger(__name__)
ENTRY = b"e/"
OFFSET = b"o/"
REFERENCE = b"r/"  # r/<artifact key>\x00<request hash> -> the entry's expiry in ms
MAX_RECORDS = 2_000
RETRY_S = 1.0


class CacheTable:
    def __init__(self, bootstrap: str, topic: str, profile: BrokerProfile, store: KeyValueStore) -> None:
        self._topic = topic
        self._store = store
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # compaction may have removed what a stored offset points at
            # The table need not be read within milliseconds: a long wait keeps its polls off the broker.
            fetch_max_wait_ms=max(profile.idle_fetch_max_wait_ms, profile.fetch_max_wait_ms),
        )
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._consumer.start()
        await self._consumer.topics()
        partitions = [
            TopicPartition(self._topic, partition)
            for partition in sorted(self._consumer.partitions_for_topic(self._topic) or ())
        ]
        self._consumer.assign(partitions)
        await self._rewind(partitions)
        self._task = asyncio.create_task(self._follow(), name="cache-table")

    def get(self, request_hash: str) -> CacheEntry | None:
        """The entry of a request, or None (also for one that does not decode: a miss, not an error)."""
        value = self._store.get(ENTRY + request_hash.encode())
        if value is None:
            return None
        try:
            return decode_as(value, CacheEntry)
        except CodecError as exc:
            log.warning(
                "the cache entry of %s does not decode (%s): treated as a miss", request_hash[:64], exc
            )
            return None

    def references(self, artifact_key: str, now: datetime) -> bool:
        """Whether an entry that has not expired at `now` points at the artifact."""
        prefix = REFERENCE + artifact_key.encode() + b"\x00"
        now_ms = int(now.timestamp() * 1000)
        return any(int(value) > now_ms for _, value in self._store.scan(prefix, prefix + b"\xff"))

    def expired(self, now: datetime, after: str | None, budget: int) -> tuple[list[str], str | None]:
        """Request hashes whose entry expired at `now` (or does not decode) among the next `budget`
        after the request hash `after`, and where to go on from (None once the table is read to its end)."""
        low = ENTRY + (after or "").encode() + (b"\x00" if after else b"")
        found: list[str] = []
        last = None
        for index, (key, value) in enumerate(self._store.scan(low, ENTRY + b"\xff")):
            if index >= budget:
                return found, last
            last = key[len(ENTRY) :].decode()
            entry = _decoded(value)
            if entry is None or entry.expires_at <= now:
                found.append(last)
        return found, None

    def offsets(self) -> dict[int, int]:
        """Per partition of the cache topic, the offset up to which this table has read it."""
        stored = self._store.scan(OFFSET, OFFSET + b"\xff")
        return {int(key[len(OFFSET) :]): int(value) for key, value in stored}

    async def _follow(self) -> None:
        while True:
            try:
                polled = await self._consumer.getmany(timeout_ms=1_000, max_records=MAX_RECORDS)
            except KafkaError as exc:
                log.warning("reading %s failed (%s); retrying", self._topic, exc)
                await asyncio.sleep(RETRY_S)
                continue
            changes: dict[bytes, bytes | None] = {}
            for tp, records in polled.items():
                # Kept as written (latest per key; a tombstone removes it), indexed by artifact.
                for record in records:
                    if record.key:
                        self._replace(record.key, record.value, changes)
                changes[OFFSET + str(tp.partition).encode()] = str(records[-1].offset + 1).encode()
            if not changes:
                continue
            try:
                self._store.write(changes)
            except StoreError as exc:
                log.warning("the cache table could not be written (%s); reading those entries again", exc)
                await self._rewind(list(polled))
                await asyncio.sleep(RETRY_S)

    def _replace(self, request_hash: bytes, value: bytes | None, changes: dict[bytes, bytes | None]) -> None:
        key = ENTRY + request_hash
        previous = changes[key] if key in changes else self._store.get(key)
        old = None if previous is None else _decoded(previous)
        for reference in _references_of(request_hash, old):
            changes[reference] = None
        changes[key] = value
        entry = None if value is None else _decoded(value)
        if entry is not None:
            expires_ms = str(int(entry.expires_at.timestamp() * 1000)).encode()
            changes.update((reference, expires_ms) for reference in _references_of(request_hash, entry))

    async def _rewind(self, partitions: list[TopicPartition]) -> None:
        """Back to where the table's store has read each partition (its start, if never)."""
        read = self.offsets()
        unread = [tp for tp in partitions if tp.partition not in read]
        for tp in partitions:
            if tp.partition in read:
                self._consumer.seek(tp, read[tp.partition])
        if unread:
            await self._consumer.seek_to_beginning(*unread)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._consumer.stop()
        self._store.close()


def _decoded(value: bytes) -> CacheEntry | None:
    try:
        return decode_as(value, CacheEntry)
    except CodecError:
        return None


def _references_of(request_hash: bytes, entry: CacheEntry | None) -> list[bytes]:
    if entry is None:
        return []
    return [REFERENCE + artifact.key.encode() + b"\x00" + request_hash for artifact in entry.artifacts]
