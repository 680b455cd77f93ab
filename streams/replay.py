"""`scrapestream replay`: rebuild the lifecycle store from the events topic, and compare it with a live one.

The rebuilt store folds each partition up to the offset the live store has reached, so the two
must agree key for key and byte for byte; the first key where they differ is reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from aiokafka import TopicPartition

from projections.jobstore import JobStore
from projections.lifecycle.policy import Policy
from projections.storage.base import KeyValueStore
from projections.storage.rocks import RocksStore
from streams.agents.lifecycle import fold_log
from streams.broker.compat import BrokerProfile, end_offsets
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
        ends = await end_offsets(settings.kafka_bootstrap, partitions, profile)
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
