"""A monitor's store keeps a checkpoint of its state in place of its folded events: reading, folding
and snapshotting it cost the same after a few checks and after many, and say what the events say."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.jobstore import CHECKPOINT_AFTER, JobStore
from projections.lifecycle.checkpoint import checkpoint_of, monitor_of
from projections.monitor_views import change_views, check_views, newest_views
from projections.storage.memory import MemoryStore
from schemas.commands import PurgeAuditRecords
from schemas.enums import ActorRole
from streams.readers.replay import first_difference
from tests.lifecycle import POLICY, T0, Lifecycle, kinds, tick
from tests.unit.test_monitor_rules import MONITOR_ID, _content, create, fetched, monitor, reading

MINUTE = timedelta(minutes=1)


def watched(checks: int, changing: bool = True) -> tuple[Lifecycle, JobStore, list[int]]:
    """A monitor checked `checks` times, each check folded as a worker folds it; the bytes of its
    snapshot entry after each check."""
    life, store = Lifecycle(), JobStore(MemoryStore(), POLICY)
    life(create())
    store.commit(0, life.events, next_offset=len(life.events))
    sizes = []
    for n in range(checks):
        before = len(life.events)
        letter, at = "ab"[n % 2] if changing else "a", T0 + MINUTE * (n + 1)
        life(tick(MONITOR_ID), at)
        life(fetched(life, _content(letter)), at)
        if monitor(life).pending is not None:  # new bytes are read; the same ones end the check at once
            life(reading(life, f"f{letter}", diff="-a\n+b\n"), at)
        store.commit(0, life.events[before:], next_offset=len(life.events))
        sizes.append(sum(len(value) for value in store.snapshot_cut(0, 10).jobs[MONITOR_ID]))
    return life, store, sizes


def test_a_monitors_snapshot_is_the_same_size_after_fifteen_checks_as_after_three():
    _, _, sizes = watched(15)
    assert sizes[14] == sizes[2]
    assert max(sizes[2:]) == sizes[2]


def test_a_fold_from_the_store_gives_the_state_every_event_gives_and_keeps_few_events():
    life, store, _ = watched(60)
    reread = JobStore(store._store, POLICY)  # nothing cached: the checkpoint and the events after it
    assert reread.load(MONITOR_ID) == monitor(life)
    assert len(reread.events_of(MONITOR_ID)) < CHECKPOINT_AFTER


def test_the_checks_and_changes_listed_are_those_every_event_tells():
    life, store, _ = watched(40)
    kept = store.events_of(MONITOR_ID)
    checks = newest_views(
        check_views(kept), store.older_checks(MONITOR_ID), lambda v: v.recorded_at, None, 100
    )
    assert checks == check_views(life.events)[:100]
    changes = newest_views(
        change_views(kept), store.older_changes(MONITOR_ID), lambda v: v.detected_at, None, 100
    )
    assert changes == change_views(life.events)[:100]
    assert len(changes) == 40


def test_a_partition_restored_from_a_snapshot_holds_the_same_monitor():
    life, store, _ = watched(20)
    cut = store.snapshot_cut(0, 10)
    restored = JobStore(MemoryStore(), POLICY)
    restored.restore(0, cut.jobs, cut.events_offset)
    assert restored.load(MONITOR_ID) == monitor(life)
    assert JobStore(restored._store, POLICY).load(MONITOR_ID) == monitor(life)


def test_only_the_newest_checks_are_listed_from_the_store(monkeypatch):
    monkeypatch.setattr("projections.jobstore.LISTED_KEPT", 5)
    life, store, _ = watched(12, changing=False)
    older = list(store.older_checks(MONITOR_ID))
    kept = check_views(store.events_of(MONITOR_ID))
    assert older == check_views(life.events)[len(kept) : len(kept) + 5]


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 12))
def test_a_checkpoint_holds_the_whole_state(checks: int):
    life, _, _ = watched(checks)
    state = monitor(life)
    assert monitor_of(checkpoint_of(state, T0)) == state


def test_a_monitors_audit_records_outlive_the_events_its_checkpoint_replaced():
    _, store, _ = watched(20)
    audits = store.audit_page([0], lambda _: True, None, 100).items
    assert [(audit.action.value, audit.target) for _, audit in audits] == [
        ("MONITOR_CREATE", f"monitor:{MONITOR_ID}")
    ]
    reread = JobStore(store._store, POLICY)
    assert reread.audit_page([0], lambda _: True, None, 100).items == audits
    cut = store.snapshot_cut(0, 10)
    restored = JobStore(MemoryStore(), POLICY)
    restored.restore(0, cut.jobs, cut.events_offset)
    assert restored.audit_page([0], lambda _: True, None, 100).items == audits
    assert restored.load(MONITOR_ID) == store.load(MONITOR_ID)


def test_a_monitors_kept_audit_records_age_out_as_a_jobs_do():
    life, store, _ = watched(5)
    assert store.audited_before(0, T0 + timedelta(days=2), 10) == [MONITOR_ID]
    later = T0 + timedelta(days=3)
    purge = PurgeAuditRecords(
        command_id=uuid4(),
        job_id=MONITOR_ID,
        before=T0 + timedelta(days=2),
        actor_id="maint",
        actor_role=ActorRole.ADMIN,
        reason="retention",
    )
    purged = life(purge, later)
    assert kinds(purged) == ["AuditRecordsPurged"]
    store.commit(0, purged, next_offset=len(life.events))
    assert store.audit_page([0], lambda _: True, None, 100).items == []
    assert store.audited_before(0, T0 + timedelta(days=2), 10) == []


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=12))
def test_a_monitors_store_is_the_same_whatever_batches_its_events_were_folded_in(sizes: list[int]):
    life, live, _ = watched(12)
    pending = life(tick(MONITOR_ID), T0 + MINUTE * 20)  # the log ends within a check
    live.commit(0, pending, next_offset=len(life.events))
    events, rebuilt, start = life.events, JobStore(MemoryStore(), POLICY), 0
    for size in sizes * 10:
        if start >= len(events):
            break
        start, batch = min(start + size, len(events)), events[start : start + size]
        rebuilt.commit(0, batch, next_offset=start)
    if start < len(events):
        rebuilt.commit(0, events[start:], next_offset=len(events))
    live.commit(0, [], next_offset=len(events))
    assert first_difference(live._store, rebuilt._store) is None
