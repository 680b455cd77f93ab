"""The lifecycle's local state: each job's events, a due-time index, and the log offset reached.

Keys (all ASCII):
  e/<job_id>/<sequence>           an event, single-object encoded
  t/<job_id>                      the job's current due key, if any
  d/<partition>/<due_ms>/<job_id> the due index, ordered by time
  o/<partition>                   offset in scrapestream.events up to which this store is complete
A commit writes all of them in one atomic batch, so state and offset never disagree.
"""

from __future__ import annotations

import typing
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from typing import cast
from uuid import UUID

from projections.lifecycle.consequences import next_due_at
from projections.lifecycle.evolve import evolve, replay
from projections.lifecycle.state import Job
from projections.storage.base import KeyValueStore
from schemas.codec import decode, encode
from schemas.errors import CodecError
from schemas.events import Event

EVENT_TYPES = typing.get_args(Event)

CACHE_SIZE = 20_000


def _events_prefix(job_id: UUID) -> bytes:
    return f"e/{job_id}/".encode()


def _due_key(partition: int, due_at: datetime, job_id: UUID) -> bytes:
    due_ms = int(due_at.timestamp() * 1000)
    return f"d/{partition:05d}/{max(due_ms, 0):015d}/{job_id}".encode()


def _offset_key(partition: int) -> bytes:
    return f"o/{partition:05d}".encode()


class JobStore:
    """Jobs folded from their events, cached in memory, persisted in a `KeyValueStore`."""

    def __init__(self, store: KeyValueStore) -> None:
        self._store = store
        self._cache: OrderedDict[UUID, Job | None] = OrderedDict()

    def load(self, job_id: UUID) -> Job | None:
        if job_id in self._cache:
            self._cache.move_to_end(job_id)
            return self._cache[job_id]
        prefix = _events_prefix(job_id)
        events = [decode_event(value) for _, value in self._store.scan(prefix, prefix + b"\xff")]
        state = replay(events)
        self._remember(job_id, state)
        return state

    def events_of(self, job_id: UUID) -> list[Event]:
        prefix = _events_prefix(job_id)
        return [decode_event(value) for _, value in self._store.scan(prefix, prefix + b"\xff")]

    def events_offset(self, partition: int) -> int:
        value = self._store.get(_offset_key(partition))
        return 0 if value is None else int(value)

    def commit(
        self, partition: int, events: Sequence[Event], next_offset: int | None
    ) -> dict[UUID, Job | None]:
        """Fold and persist `events` (appended to the log of `partition`), with the new offset."""
        changes: dict[bytes, bytes | None] = {}
        states: dict[UUID, Job | None] = {}
        for event in events:
            job_id = event.job_id
            before = states[job_id] if job_id in states else self.load(job_id)
            if before is not None and event.sequence <= before.sequence:
                continue  # already folded: the log is read again after a restart
            after = evolve(before, event)
            states[job_id] = after
            if after is not None:
                changes[_events_prefix(job_id) + f"{event.sequence:010d}".encode()] = encode(event)
        for job_id, state in states.items():
            self._index(partition, job_id, state, changes)
        if next_offset is not None:
            changes[_offset_key(partition)] = str(next_offset).encode()
        self._store.write(changes)
        for job_id, state in states.items():
            self._remember(job_id, state)
        return states

    def _index(
        self, partition: int, job_id: UUID, state: Job | None, changes: dict[bytes, bytes | None]
    ) -> None:
        pointer = f"t/{job_id}".encode()
        previous = self._store.get(pointer)
        due_at = None if state is None else next_due_at(state)
        current = None if due_at is None else _due_key(partition, due_at, job_id)
        if previous is not None and previous != current:
            changes[previous] = None
        if current is None:
            changes[pointer] = None
        else:
            changes[current] = b""
            changes[pointer] = current

    def due(self, partition: int, until: datetime) -> list[tuple[int, UUID]]:
        """(due ms, job id) of `partition` whose next timer is at or before `until`, oldest first."""
        prefix = f"d/{partition:05d}/".encode()
        high = _due_key(partition, until, UUID(int=2**128 - 1)) + b"\xff"
        return [_parse_due(key) for key, _ in self._store.scan(prefix, high)]

    def due_after(self, partition: int, after: datetime) -> list[tuple[int, UUID]]:
        """(due ms, job id) of `partition` whose next timer is later than `after`."""
        prefix = f"d/{partition:05d}/".encode()
        low = _due_key(partition, after, UUID(int=2**128 - 1)) + b"\xff"
        return [_parse_due(key) for key, _ in self._store.scan(low, prefix + b"\xff")]

    def _remember(self, job_id: UUID, state: Job | None) -> None:
        self._cache[job_id] = state
        self._cache.move_to_end(job_id)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)

    def close(self) -> None:
        self._store.close()


def _parse_due(key: bytes) -> tuple[int, UUID]:
    _, _, due_ms, job_id = key.decode().split("/")
    return int(due_ms), UUID(job_id)


def decode_event(value: bytes) -> Event:
    event = decode(value)
    if not isinstance(event, EVENT_TYPES):
        raise CodecError(f"expected an event, found {type(event).__name__}")
    return cast(Event, event)
