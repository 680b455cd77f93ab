"""One contract, every storage implementation."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import msgspec
import pytest

from projections.jobstore import JobStore
from projections.lifecycle.consequences import next_due_at
from projections.lifecycle.evolve import replay
from projections.storage.memory import MemoryStore
from projections.storage.rocks import RocksStore
from tests.lifecycle import POLICY, T0, Lifecycle, attempt_under, report, submit


@pytest.fixture(params=["memory", "rocksdb"])
def store(request, tmp_path):
    backend = MemoryStore() if request.param == "memory" else RocksStore(tmp_path / "db")
    yield backend
    backend.close()


def test_a_batch_puts_and_deletes_and_reads_back_in_key_order(store):
    store.write({b"b/2": b"two", b"a/1": b"one", b"b/1": b"first"})
    store.write({b"b/2": None, b"c/1": b"three"})
    assert store.get(b"a/1") == b"one"
    assert store.get(b"b/2") is None
    assert list(store.scan(b"b/", b"c/")) == [(b"b/1", b"first")]
    assert [key for key, _ in store.scan(b"", b"\xff")] == [b"a/1", b"b/1", b"c/1"]


def test_deleting_a_missing_key_is_harmless(store):
    store.write({b"nothing": None})
    assert list(store.scan(b"", b"\xff")) == []


def test_the_job_store_folds_commits_and_survives_reopening(tmp_path):
    lifecycle = Lifecycle()
    lifecycle(submit())
    job_id = lifecycle.job.job_id
    path = tmp_path / "jobs"
    jobs = JobStore(RocksStore(path), POLICY)
    jobs.commit(0, lifecycle.events, next_offset=2)
    jobs.close()
    reopened = JobStore(RocksStore(path), POLICY)
    try:
        assert reopened.load(job_id) == lifecycle.job
        assert reopened.events_offset(0) == 2
        assert reopened.events_of(job_id) == lifecycle.events
    finally:
        reopened.close()


def test_events_already_folded_are_not_folded_twice(store):
    lifecycle = Lifecycle()
    lifecycle(submit())
    jobs = JobStore(store, POLICY)
    jobs.commit(0, lifecycle.events, next_offset=2)
    folded = jobs.commit(0, lifecycle.events, next_offset=2)
    assert JobStore(store, POLICY).load(lifecycle.job.job_id) == lifecycle.job
    assert len(folded.ignored) == len(lifecycle.events)
    assert jobs.duplicates_ignored == len(lifecycle.events)


def test_the_first_event_of_a_job_and_sequence_wins_and_later_conflicting_ones_are_ignored(store):
    first, second = Lifecycle(), Lifecycle()
    command = submit()
    first(command, T0)
    second(msgspec.structs.replace(command, command_id=uuid4()), T0 + timedelta(seconds=1))
    jobs = JobStore(store, POLICY)
    # Two writers' histories of one job interleaved in the log: the fold keeps the first of each sequence.
    log = [event for pair in zip(first.events, second.events, strict=True) for event in pair]
    jobs.commit(0, log, next_offset=len(log))
    assert jobs.load(first.job.job_id) == first.job
    assert jobs.events_of(first.job.job_id) == first.events
    assert jobs.duplicates_ignored == len(second.events)
    assert JobStore(store, POLICY).load(first.job.job_id) == replay(first.events)


def test_a_gap_in_a_job_sequence_is_not_folded(store):
    lifecycle = Lifecycle()
    lifecycle(submit())
    jobs = JobStore(store, POLICY)
    jobs.commit(0, lifecycle.events[1:], next_offset=2)
    assert jobs.load(lifecycle.job.job_id) is None
    assert jobs.duplicates_ignored == len(lifecycle.events) - 1


def test_the_due_index_follows_each_job_to_its_next_timer(store):
    lifecycle = Lifecycle()
    lifecycle(submit())
    jobs = JobStore(store, POLICY)
    jobs.commit(0, lifecycle.events, next_offset=2)
    lease_expiry = lifecycle.job.lease.lease_expires_at
    assert next_due_at(lifecycle.job, POLICY) == lease_expiry
    assert jobs.due(0, lease_expiry - timedelta(milliseconds=1)) == []
    assert [job for _, job in jobs.due(0, lease_expiry)] == [lifecycle.job.job_id]
    assert [job for _, job in jobs.leases_after(0, T0)] == [lifecycle.job.job_id]
    done = lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)))
    jobs.commit(0, done, next_offset=4)
    assert jobs.due(0, lease_expiry + timedelta(days=1)) == []
    assert jobs.leases_after(0, T0) == []
