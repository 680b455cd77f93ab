"""`scrapestream replay`: rebuild the lifecycle store from the events topic, and compare it with a live one.

The rebuilt store folds each partition up to the offset the live store has reached, so the two
must agree key for key and byte for byte; the first key where they differ is reported. The topics
are checked too, as a `read_committed` reader sees them: at most one terminal event per job, and,
with `exactly_once`, at most one completion per job and outcome.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from aiokafka import ConsumerRecord, TopicPartition

from projections.jobstore import EVENT_TYPES, JobStore
from projections.lifecycle.consequences import TERMINAL_EVENTS
from projections.lifecycle.policy import Policy
from projections.storage.base import KeyValueStore
from projections.storage.rocks import RocksStore
from schemas.codec import decode_or_none
from schemas.enums import JobStatus
from schemas.events import JobCompleted
from streams.broker.compat import BrokerProfile, end_offsets, records_between
from streams.readers.events_log import fold_log
from streams.settings import Settings


@dataclass(frozen=True)
class Difference:
    key: bytes
    live: bytes | None
    rebuilt: bytes | None

    def describe(self) -> str:
        key = self.key.decode(errors="replace")
        return f"first difference at key {key!r}: live {_show(self.live)}, rebuilt {_show(self.rebuilt)}"


def _show(value: bytes | None) -> str:
    return "absent" if value is None else f"{len(value)} bytes {value[:48].hex()}"


async def rebuild(
    settings: Settings,
    profile: BrokerProfile,
    policy: Policy,
    target: Path,
    upto: dict[int, int] | None = None,
) -> dict[int, int]:
    """Fold every events partition (up to `upto[partition]` when given) into a fresh store at `target`."""
    store = JobStore(RocksStore(target), policy)
    try:
        partitions = [TopicPartition(settings.topic("events"), p) for p in range(settings.partitions)]
        ends = await end_offsets(settings.kafka_access, partitions, profile)
        folded: dict[int, int] = {}
        for tp in partitions:
            end = ends[tp] if upto is None else min(ends[tp], upto.get(tp.partition, 0))
            folded[tp.partition] = await fold_log(settings, tp, 0, end, store) if end > 0 else 0
        return folded
    finally:
        store.close()


async def verify(
    settings: Settings, profile: BrokerProfile, policy: Policy, scratch: Path
) -> Difference | None:
    """Rebuild into `scratch` up to the live store's offsets; the first key where they differ, or None."""
    live = RocksStore(settings.data_dir / "lifecycle", read_only=True)
    try:
        offsets = {p: JobStore(live, policy).events_offset(p) for p in range(settings.partitions)}
        await rebuild(settings, profile, policy, scratch, upto=offsets)
        rebuilt = RocksStore(scratch, read_only=True)
        try:
            return first_difference(live, rebuilt)
        finally:
            rebuilt.close()
    finally:
        live.close()


def first_difference(live: KeyValueStore, rebuilt: KeyValueStore) -> Difference | None:
    """The first differing key of the two stores' state (snapshot bookkeeping, `s/`, is not state)."""
    left, right = _state(live), _state(rebuilt)
    a, b = next(left, None), next(right, None)
    while a is not None and b is not None:
        if a == b:
            a, b = next(left, None), next(right, None)
        elif a[0] < b[0]:
            return Difference(a[0], a[1], None)
        elif b[0] < a[0]:
            return Difference(b[0], None, b[1])
        else:
            return Difference(a[0], a[1], b[1])
    if a is not None:
        return Difference(a[0], a[1], None)
    if b is not None:
        return Difference(b[0], None, b[1])
    return None


def _state(store: KeyValueStore) -> Iterator[tuple[bytes, bytes]]:
    return ((key, value) for key, value in store.scan(b"", b"\xff") if not key.startswith(b"s/"))


@dataclass(frozen=True)
class LogCheck:
    """What `replay --verify` finds in the topics themselves, read as committed."""

    jobs: int
    terminal_events_over_one: dict[UUID, int]  # job -> terminal events, where more than one
    completions_over_one: dict[UUID, int]  # job -> completions of one outcome, where more than one

    def problems(self, duplicates_allowed: bool) -> list[str]:
        found = []
        if self.terminal_events_over_one:
            found.append(
                f"{len(self.terminal_events_over_one)} jobs have more than one terminal event: "
                f"{_some(self.terminal_events_over_one)}"
            )
        if self.completions_over_one and not duplicates_allowed:
            found.append(
                f"{len(self.completions_over_one)} jobs have more than one completion: "
                f"{_some(self.completions_over_one)}"
            )
        return found


def _some(counts: dict[UUID, int]) -> str:
    shown = ", ".join(f"{job_id} ({n})" for job_id, n in list(counts.items())[:5])
    return shown + (", …" if len(counts) > 5 else "")


async def check_log(settings: Settings, profile: BrokerProfile) -> LogCheck:
    """Every job's terminal events in the events topic, and its completions in the completions topic.

    A completion is one per outcome: a job id may also see `REJECTED` completions of refused
    submissions, each its own (told apart by their time)."""
    terminal: Counter[UUID] = Counter()  # every job, with its terminal events
    async for record in _committed(settings, profile, "events"):
        event = decode_or_none(record.value)
        if isinstance(event, EVENT_TYPES):
            terminal[event.job_id] += isinstance(event, TERMINAL_EVENTS)
    outcomes: Counter[tuple[UUID, JobStatus, object]] = Counter()
    async for record in _committed(settings, profile, "completions"):
        completion = decode_or_none(record.value)
        if isinstance(completion, JobCompleted):
            rejected = completion.status is JobStatus.REJECTED
            outcomes[
                (completion.job_id, completion.status, completion.completed_at if rejected else None)
            ] += 1
    return LogCheck(
        jobs=len(terminal),
        terminal_events_over_one={job: n for job, n in terminal.items() if n > 1},
        completions_over_one={key[0]: n for key, n in outcomes.items() if n > 1},
    )


async def _committed(
    settings: Settings, profile: BrokerProfile, name: str
) -> AsyncIterator[ConsumerRecord[bytes, bytes]]:
    """Every committed record of a topic, partition by partition (the topic is never held whole)."""
    topic = settings.topic(name)
    partitions = [TopicPartition(topic, p) for p in range(settings.partitions)]
    ends = await end_offsets(settings.kafka_access, partitions, profile)
    for tp in partitions:
        if ends[tp] > 0:
            reading = records_between(
                settings.kafka_access, tp, None, ends[tp], isolation_level=profile.isolation_level
            )
            async with contextlib.aclosing(reading):
                async for records in reading:
                    for record in records:
                        yield record
