"""The response cache, the artifact references and the job type controls as every worker sees
them: all of `scrapestream.cache`, `scrapestream.references` and `scrapestream.controls`, folded
into a local store.

Both are written by the lifecycles as consequences of attempts (`projections.lifecycle.consequences`)
on compacted topics: cache entries keyed by request identity, references keyed by object and job.
Each worker reads every partition from where its store left off (a global table, as Faust's
GlobalTable and Kafka Streams' GlobalKTable are), so a job on any partition sees an entry made on
any other once this worker has read it: within one fetch wait of the table's consumer (500 ms with
either broker). Maintenance asks it what still points at an object.
A record the table cannot use (a key that is not a request hash or an object reference, a value
that does not decode or that the fold raises on) is skipped and counted (`skipped`): one bad
record costs one entry, never the reader or a maintenance round.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Mapping
from datetime import datetime

from aiokafka import ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from projections.artifacts import Pointers
from projections.storage.base import KeyValueStore, StoreError, prefix_end
from schemas.codec import decode_as
from schemas.errors import CodecError
from schemas.work import (
    ArtifactPurged,
    ArtifactReference,
    CacheEntry,
    ExecutorAnnouncement,
    JobTypeControl,
)
from streams.broker.access import KafkaAccess
from streams.broker.clients import kafka_consumer
from streams.broker.compat import BrokerProfile, end_offsets, partitions_known, start_whole
from streams.readers.follower import RETRY_S, TopicFollower, poll_or_wait

log = logging.getLogger(__name__)
ENTRY = b"e/"
OFFSET = b"o/"
# r/<artifact key>\x00<request hash or job id> -> the entry's or the job's record's expiry in ms
# (empty: no expiry while the job's history lasts)
REFERENCE = b"r/"
CONTROL = b"c/"  # c/<job type> -> its JobTypeControl, as an operator last set it
EXECUTOR = b"x/"  # x/<worker> -> its ExecutorAnnouncement, as it last announced itself
EXECUTOR_KEY = b"executor/"  # how the controls topic keys an announcement
MAX_RECORDS = 2_000
# Other workers' entries need not arrive within milliseconds: a long fetch wait keeps an idle
# table's polls off the broker (tansu answers an empty fetch after half of it).
FOLLOW_WAIT_MS = 2_000
REQUEST_HASH = re.compile(rb"[0-9a-f]{64}")
MAX_REFERENCE_KEY_BYTES = 1_024


class GlobalTable(TopicFollower):
    def __init__(
        self,
        kafka: KafkaAccess,
        cache_topic: str,
        references_topic: str,
        controls_topic: str,
        profile: BrokerProfile,
        store: KeyValueStore,
    ) -> None:
        self._kafka = kafka
        self._profile = profile
        self._cache_topic = cache_topic
        self._references_topic = references_topic
        self._controls_topic = controls_topic
        self.disabled: Mapping[str, str] = {}  # job types switched off -> why; replaced whole on change
        self.executors: Mapping[str, ExecutorAnnouncement] = {}  # by worker; replaced whole on change
        self._store = store
        self._ends: dict[TopicPartition, int] | None = None
        self._consumer = kafka_consumer(
            kafka,
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # compaction may have removed what a stored offset points at
            fetch_max_wait_ms=FOLLOW_WAIT_MS,
            isolation_level=profile.isolation_level,
        )
        self._task: asyncio.Task[None] | None = None
        self._positions: dict[TopicPartition, int] = {}  # as last written to the store
        self.skipped = 0

    async def start(self) -> None:
        await start_whole(self._consumer.start, self._consumer.stop)
        topics = [self._cache_topic, self._references_topic, self._controls_topic]
        partitions = await partitions_known(self._consumer, topics)
        self._consumer.assign(partitions)
        await self._rewind(partitions)
        self.disabled = self._switched_off()
        self.executors = self._announced()
        self._ends = await end_offsets(self._kafka, partitions, self._profile)
        self._task = asyncio.create_task(self._follow(), name="global-table")

    def caught_up(self) -> bool:
        """Whether the table has read both topics up to where they ended when it started: before
        that, an object's pointers may not be known yet."""
        if self._ends is None:
            return False
        read = self.offsets()
        return all(read.get((tp.topic, tp.partition), 0) >= end for tp, end in self._ends.items() if end > 0)

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

    def pointers(self, artifact_key: str, now: datetime) -> Pointers:
        """What points at the object at `now`: cache entries and jobs' artifact records."""
        prefix = REFERENCE + artifact_key.encode() + b"\x00"
        now_ms = int(now.timestamp() * 1000)
        found = Pointers.NONE
        for _, expires_ms in self._store.scan(prefix, prefix + b"\xff"):
            if not expires_ms or int(expires_ms) > now_ms:
                return Pointers.LIVE
            found = Pointers.LAPSED
        return found

    def expired(self, now: datetime, after: str | None, budget: int) -> tuple[list[str], str | None]:
        """Request hashes whose entry expired at `now` (or does not decode) among the next `budget`
        after the request hash `after`, and where to go on from (None once the table is read to its end)."""
        low = ENTRY + (after or "").encode() + (b"\x00" if after else b"")
        found: list[str] = []
        last = None
        for index, (key, value) in enumerate(self._store.scan(low, prefix_end(ENTRY))):
            if index >= budget:
                return found, last
            if not REQUEST_HASH.fullmatch(key[len(ENTRY) :]):
                continue  # not a request's entry (kept by an older reader): nothing to expire
            last = key[len(ENTRY) :].decode()
            entry = _decoded(value)
            if entry is None or entry.expires_at <= now:
                found.append(last)
        return found, None

    def hold(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Cache entries (request hash, encoded entry) this worker is about to publish: readable here
        at once, so a completion it publishes next is never ahead of its own entry."""
        changes: dict[bytes, bytes | None] = {}
        for key, value in entries:
            if REQUEST_HASH.fullmatch(key):
                self._replace(key, value, changes)
        if changes:
            self._store.write(changes)

    def offsets(self) -> dict[tuple[str, int], int]:
        """Per topic partition, the offset up to which this table has read it."""
        stored = self._store.scan(OFFSET, OFFSET + b"\xff")
        found = {}
        for key, value in stored:
            topic, _, partition = key[len(OFFSET) :].decode().rpartition("/")
            found[(topic, int(partition))] = int(value)
        return found

    async def _follow(self) -> None:
        while True:
            polled = await poll_or_wait(self._consumer, MAX_RECORDS, "the global table")
            changes: dict[bytes, bytes | None] = {}
            for tp, records in polled.items():
                for record in records:
                    self._fold(tp, record, changes)
            await self._note_positions(changes)
            if not changes:
                continue
            try:
                self._store.write(changes)
                if any(key.startswith(CONTROL) for key in changes):
                    self.disabled = self._switched_off()
                if any(key.startswith(EXECUTOR) for key in changes):
                    self.executors = self._announced()
            except StoreError as exc:
                log.warning("the global table could not be written (%s); reading those records again", exc)
                self._positions.clear()
                await self._rewind(list(self._consumer.assignment()))
                await asyncio.sleep(RETRY_S)

    async def _note_positions(self, changes: dict[bytes, bytes | None]) -> None:
        """Read up to the consumer's position: past the last record, and past a transaction's marker
        or aborted records after it, which a `read_committed` poll skips without returning any."""
        for tp in self._consumer.assignment():
            try:
                position = await self._consumer.position(tp)
            except KafkaError:
                continue
            if position != self._positions.get(tp):
                self._positions[tp] = position
                changes[_offset_key(tp)] = str(position).encode()

    def _fold(
        self, tp: TopicPartition, record: ConsumerRecord[bytes, bytes], changes: dict[bytes, bytes | None]
    ) -> None:
        """Kept as written (latest per key; a tombstone removes it), indexed by artifact."""
        key = record.key or b""
        try:
            if tp.topic == self._cache_topic:
                problem = None if REQUEST_HASH.fullmatch(key) else "its key is not a request hash"
                if problem is None:
                    self._replace(key, record.value, changes)
            elif tp.topic == self._controls_topic and key.startswith(EXECUTOR_KEY):
                problem = _announcement_problem(key, record.value)
                if problem is None:
                    changes[EXECUTOR + key[len(EXECUTOR_KEY) :]] = record.value
            elif tp.topic == self._controls_topic:
                problem = _control_problem(key, record.value)
                if problem is None:
                    changes[CONTROL + key] = record.value
            else:
                problem = None if _reference_key(key) else "its key is not an object reference"
                if problem is None:
                    self._reference(key, record.value, changes)
        except Exception as exc:  # whatever one record makes the fold raise costs that record only
            problem = f"folding it raised {type(exc).__name__}: {exc}"
        if problem is not None:
            self.skipped += 1
            log.warning("%s record %d/%d is skipped: %s", tp.topic, tp.partition, record.offset, problem)

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

    def _reference(self, key: bytes, value: bytes | None, changes: dict[bytes, bytes | None]) -> None:
        """A job's reference to an object (its tombstone releases it); purge records are not kept."""
        if value is None:
            changes[REFERENCE + key] = None
            return
        try:
            found = decode_as(value, ArtifactReference, ArtifactPurged)
        except CodecError as exc:
            # Read as no expiry: an unreadable reference keeps its object rather than losing it.
            log.warning("the artifact reference %r does not decode (%s): kept as live", key[:96], exc)
            changes[REFERENCE + key] = b""
            return
        if isinstance(found, ArtifactReference):
            expires = found.expires_at
            changes[REFERENCE + key] = (
                b"" if expires is None else str(int(expires.timestamp() * 1000)).encode()
            )

    def controls(self) -> dict[str, JobTypeControl]:
        """Each job type an operator switched off or on at run time, as last set."""
        found = (
            decode_as(value, JobTypeControl) for _, value in self._store.scan(CONTROL, prefix_end(CONTROL))
        )
        return {control.job_type: control for control in found if isinstance(control, JobTypeControl)}

    def _announced(self) -> Mapping[str, ExecutorAnnouncement]:
        found = (
            decode_as(value, ExecutorAnnouncement)
            for _, value in self._store.scan(EXECUTOR, prefix_end(EXECUTOR))
        )
        return {said.worker: said for said in found if isinstance(said, ExecutorAnnouncement)}

    def _switched_off(self) -> Mapping[str, str]:
        return {name: control.reason for name, control in self.controls().items() if not control.enabled}

    async def _rewind(self, partitions: list[TopicPartition]) -> None:
        """Back to where the table's store has read each partition (its start, if never)."""
        read = self.offsets()
        unread = [tp for tp in partitions if (tp.topic, tp.partition) not in read]
        for tp in partitions:
            if (tp.topic, tp.partition) in read:
                self._consumer.seek(tp, read[(tp.topic, tp.partition)])
        if unread:
            await self._consumer.seek_to_beginning(*unread)

    def _closed(self) -> None:
        self._store.close()


def _reference_key(key: bytes) -> bool:
    if not 0 < len(key) <= MAX_REFERENCE_KEY_BYTES:
        return False
    try:
        key.decode()
    except UnicodeDecodeError:
        return False
    return True


def _control_problem(key: bytes, value: bytes | None) -> str | None:
    """Why a controls record is not one the table keeps (a tombstone is: the type is on again)."""
    if value is None:
        return None
    try:
        control = decode_as(value, JobTypeControl)
    except CodecError as exc:
        return f"it does not decode: {exc}"
    if not isinstance(control, JobTypeControl) or control.job_type.encode() != key:
        return "its key is not the job type it controls"
    return None


def _announcement_problem(key: bytes, value: bytes | None) -> str | None:
    """Why a worker's announcement is not one the table keeps (a tombstone is: the worker stopped)."""
    if value is None:
        return None
    try:
        said = decode_as(value, ExecutorAnnouncement)
    except CodecError as exc:
        return f"it does not decode: {exc}"
    if not isinstance(said, ExecutorAnnouncement) or EXECUTOR_KEY + said.worker.encode() != key:
        return "its key is not the worker it announces"
    return None


def _offset_key(tp: TopicPartition) -> bytes:
    return OFFSET + f"{tp.topic}/{tp.partition}".encode()


def _decoded(value: bytes) -> CacheEntry | None:
    try:
        return decode_as(value, CacheEntry)
    except CodecError:
        return None


def _references_of(request_hash: bytes, entry: CacheEntry | None) -> list[bytes]:
    if entry is None:
        return []
    return [REFERENCE + artifact.key.encode() + b"\x00" + request_hash for artifact in entry.artifacts]
