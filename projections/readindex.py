"""Read-side indexes of the job store, newest first, and bounded pages over them.

Keys (all ASCII; a position is `<10^15 - ms>/<uuid>`, so key order is newest first):
  j/<partition>/<position>               every job, by acceptance time
  c/<partition>/<caller hex>/<position>  every job of one caller
  x/<partition>/<position>               dead-lettered jobs, by completion time
  a/<partition>/<position>               audit records, by time; the value is the event's key
  r/<partition>/<artifact_id>/<job_id>   a job that stored an artifact; the value is the Artifact record
  n/<partition>/<status>                 how many jobs of the partition are in that status
  k/<job_id>                             a job whose history was deleted (its id keeps its sequence)
  m/<partition>/<position>               every monitor, by first creation
  w/<partition>/<caller hex>/<position>  every monitor of one caller
A page reads at most `budget` index entries: a selective filter gives a short page and a position
to go on from, never an unbounded scan.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar
from uuid import UUID

from projections.storage.base import KeyValueStore
from schemas.types import uuid_text

T = TypeVar("T")
NEWEST = 10**15
POSITION_LENGTH = 15 + 1 + 36


def position(at: datetime, identity: UUID) -> str:
    millis = int(at.timestamp() * 1000)
    return f"{NEWEST - max(millis, 0):015d}/{uuid_text(identity)}"


def position_before(at: datetime) -> str:
    """The lowest position of anything written before `at` (positions run newest first)."""
    millis = int(at.timestamp() * 1000)
    return f"{NEWEST - max(millis - 1, 0):015d}/"


def position_time_ms(value: str) -> int:
    return NEWEST - int(value[:15])


def is_position(value: str) -> bool:
    head, _, tail = value.partition("/")
    return len(value) == POSITION_LENGTH and value.isascii() and head.isdigit() and len(tail) == 36


def job_key(partition: int, at: datetime, job_id: UUID) -> bytes:
    return f"j/{partition:05d}/{position(at, job_id)}".encode()


def caller_key(partition: int, caller: str, at: datetime, job_id: UUID) -> bytes:
    return f"{_caller_prefix(partition, caller)}{position(at, job_id)}".encode()


def monitor_keys(partition: int, caller: str, at: datetime, monitor_id: UUID) -> tuple[bytes, bytes]:
    """A monitor's entries in the listing of every monitor and in its caller's."""
    at_position = position(at, monitor_id)
    return (
        f"m/{partition:05d}/{at_position}".encode(),
        f"{_caller_prefix(partition, caller, 'w')}{at_position}".encode(),
    )


def dead_letter_key(partition: int, at: datetime, job_id: UUID) -> bytes:
    return f"x/{partition:05d}/{position(at, job_id)}".encode()


def audit_key(partition: int, at: datetime, audit_id: UUID) -> bytes:
    return f"a/{partition:05d}/{position(at, audit_id)}".encode()


def artifact_ref_key(partition: int, artifact_id: UUID, job_id: UUID) -> bytes:
    return f"r/{partition:05d}/{uuid_text(artifact_id)}/{uuid_text(job_id)}".encode()


def artifact_refs_prefix(partition: int, artifact_id: UUID) -> bytes:
    return f"r/{partition:05d}/{uuid_text(artifact_id)}/".encode()


def count_key(partition: int, status: str) -> bytes:
    return f"n/{partition:05d}/{status}".encode()


def tombstone_key(job_id: UUID) -> bytes:
    return f"k/{uuid_text(job_id)}".encode()


def _caller_prefix(partition: int, caller: str, kind: str = "c") -> str:
    return f"{kind}/{partition:05d}/{caller.encode('utf-8', 'surrogatepass').hex()}/"


def index_prefix(kind: str, partition: int, caller: str | None = None) -> str:
    if kind in ("c", "w"):  # a caller's jobs, a caller's monitors
        return _caller_prefix(partition, caller or "", kind)
    return f"{kind}/{partition:05d}/"


@dataclass(frozen=True)
class Page(Generic[T]):
    """Items in position order; `resume_after` is where the next page starts, None at the end."""

    items: list[tuple[str, T]]
    resume_after: str | None


def scan_page(
    store: KeyValueStore,
    prefixes: Iterable[str],
    load: Callable[[str, bytes], T | None],
    after: str | None,
    limit: int,
    budget: int,
    oldest_ms: int | None = None,
) -> Page[T]:
    """Walk several index ranges newest first, merged; `load` maps an entry to an item or None (filtered).

    Reads at most `budget` entries; stops at entries older than `oldest_ms`.
    """
    ranges = [_entries(store, prefix, after) for prefix in prefixes]
    items: list[tuple[str, T]] = []
    previous = after
    for examined, (at, value) in enumerate(heapq.merge(*ranges)):
        if oldest_ms is not None and position_time_ms(at) < oldest_ms:
            return Page(items, None)
        if examined >= budget:
            return Page(items, previous)
        previous = at
        item = load(at, value)
        if item is not None:
            items.append((at, item))
            if len(items) >= limit:
                return Page(items, at)
    return Page(items, None)


def _entries(store: KeyValueStore, prefix: str, after: str | None) -> Iterator[tuple[str, bytes]]:
    low = (prefix + after).encode() + b"\x00" if after else prefix.encode()
    high = prefix.encode() + b"\xff"
    for key, value in store.scan(low, high):
        yield key.decode()[len(prefix) :], value


def merge_pages(pages: Iterable[Page[T]], limit: int) -> Page[T]:
    """Several shards' pages as one: nothing past the point where any shard stopped early."""
    collected = list(pages)
    stops = [page.resume_after for page in collected if page.resume_after is not None]
    boundary = min(stops) if stops else None
    merged = sorted((item for page in collected for item in page.items), key=lambda item: item[0])
    if boundary is not None:
        merged = [item for item in merged if item[0] <= boundary]
    taken = merged[:limit]
    if len(taken) == limit:
        return Page(taken, taken[-1][0])
    return Page(taken, boundary)
