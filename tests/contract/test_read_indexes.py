"""The job store's read side: listings, dead letters, audit, counts, deleted histories."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections import jobstore
from projections.jobstore import JobQuery, JobStore
from projections.lifecycle.state import Unaccepted
from projections.readindex import Page, merge_pages
from projections.storage.memory import MemoryStore
from projections.storage.rocks import RocksStore
from schemas.commands import DeleteJobHistory, RedriveJob
from schemas.enums import ActorRole, AttemptOutcome, JobStatus
from schemas.events import AuditRecorded
from tests.lifecycle import POLICY, T0, Lifecycle, attempt_under, failure, report, submit


@pytest.fixture(params=["memory", "rocksdb"])
def store(request, tmp_path):
    backend = MemoryStore() if request.param == "memory" else RocksStore(tmp_path / "db")
    yield backend
    backend.close()


def make_job(jobs: JobStore, partition: int, seconds: int, caller: str = "svc-a", outcome=None) -> Lifecycle:
    lifecycle = Lifecycle()
    at = T0 + timedelta(seconds=seconds)
    lifecycle(submit(caller_identity=caller, idempotency_key=str(uuid4())), at)
    if outcome is AttemptOutcome.FETCHED:
        lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)), at)
    elif outcome is AttemptOutcome.HTTP_ERROR:
        attempt = attempt_under(lifecycle.job, outcome, failure=failure("HTTP_404", retryable=False))
        lifecycle(report(lifecycle.job, attempt), at)
    jobs.commit(partition, lifecycle.events, None)
    return lifecycle


def every_page(jobs: JobStore, partitions, query: JobQuery, limit: int) -> list[list[str]]:
    pages, after = [], None
    while True:
        page = jobs.jobs_page(partitions, query, after, limit)
        pages.append([str(job.job_id) for _, job in page.items])
        if page.resume_after is None:
            return pages
        after = page.resume_after


def test_jobs_list_newest_first_across_partitions_and_pages_visit_each_once(store):
    jobs = JobStore(store, POLICY)
    made = [make_job(jobs, partition=n % 3, seconds=n) for n in range(10)]
    newest_first = [str(lifecycle.job.job_id) for lifecycle in reversed(made)]
    pages = every_page(jobs, [0, 1, 2], JobQuery(), limit=3)
    assert [job for page in pages for job in page] == newest_first
    assert all(len(page) <= 3 for page in pages)
    # A worker answers only for the partitions it owns.
    assert every_page(jobs, [1], JobQuery(), limit=100)[0] == [
        str(lifecycle.job.job_id) for n, lifecycle in reversed(list(enumerate(made))) if n % 3 == 1
    ]


def test_filters_by_caller_state_type_and_since(store):
    jobs = JobStore(store, POLICY)
    a_done = make_job(jobs, 0, 1, "svc-a", AttemptOutcome.FETCHED)
    b_running = make_job(jobs, 1, 2, "svc-b")
    a_running = make_job(jobs, 0, 3, "svc-a")

    def listed(query: JobQuery) -> list:
        return [job.job_id for _, job in jobs.jobs_page([0, 1], query, None, 10).items]

    assert listed(JobQuery(caller="svc-a")) == [a_running.job.job_id, a_done.job.job_id]
    assert listed(JobQuery(statuses=frozenset({JobStatus.LEASED}))) == [
        a_running.job.job_id,
        b_running.job.job_id,
    ]
    assert listed(JobQuery(job_type="browser.render")) == []
    assert listed(JobQuery(since=T0 + timedelta(seconds=2))) == [a_running.job.job_id, b_running.job.job_id]


def test_a_selective_filter_reads_a_bounded_number_of_entries_and_still_finds_everything(store, monkeypatch):
    monkeypatch.setattr(jobstore, "SCAN_BUDGET", 4)
    jobs = JobStore(store, POLICY)
    made = [make_job(jobs, 0, n, "svc-a" if n % 5 == 0 else "svc-b") for n in range(20)]
    query = JobQuery(statuses=frozenset({JobStatus.LEASED}), job_type="http.fetch", caller=None)
    wanted = JobQuery(caller="svc-a")
    pages = every_page(jobs, [0], JobQuery(statuses=query.statuses), limit=50)
    assert len(pages) > 1  # the budget cut the walk into several pages
    found = [job for page in pages for job in page]
    assert found == [str(lifecycle.job.job_id) for lifecycle in reversed(made)]
    only_a = every_page(jobs, [0], wanted, limit=50)
    assert [job for page in only_a for job in page] == [
        str(lifecycle.job.job_id) for n, lifecycle in reversed(list(enumerate(made))) if n % 5 == 0
    ]


def test_dead_letters_are_listed_until_redriven(store):
    jobs = JobStore(store, POLICY)
    dead = make_job(jobs, 0, 1, outcome=AttemptOutcome.HTTP_ERROR)
    make_job(jobs, 0, 2, outcome=AttemptOutcome.FETCHED)
    assert dead.job.status is JobStatus.DEAD_LETTER
    listed = jobs.jobs_page([0], JobQuery(dead_letters=True), None, 10)
    assert [job.job_id for _, job in listed.items] == [dead.job.job_id]
    redriven = dead(
        RedriveJob(job_id=dead.job.job_id, actor_id="ops", actor_role=ActorRole.ADMIN, reason="fixed"),
        T0 + timedelta(seconds=5),
    )
    jobs.commit(0, redriven, None)
    assert jobs.jobs_page([0], JobQuery(dead_letters=True), None, 10).items == []
    assert jobs.status_counts([0]) == {"LEASED": 1, "SUCCEEDED": 1}


def test_audit_records_are_listed_newest_first_and_filtered(store):
    jobs = JobStore(store, POLICY)
    first = make_job(jobs, 0, 1, "svc-a")
    second = make_job(jobs, 1, 2, "svc-b")
    page = jobs.audit_page([0, 1], lambda _: True, None, 10)
    assert [audit.job_id for _, audit in page.items] == [second.job.job_id, first.job.job_id]
    only_b = jobs.audit_page([0, 1], lambda audit: audit.actor_id == "svc-b", None, 10)
    assert [audit.actor_id for _, audit in only_b.items] == ["svc-b"]


def test_a_deleted_history_keeps_its_audit_records_and_a_tombstone_and_replays_the_same(store, tmp_path):
    jobs = JobStore(store, POLICY)
    lifecycle = make_job(jobs, 0, 1, outcome=AttemptOutcome.FETCHED)
    job_id = lifecycle.job.job_id
    deleted = lifecycle(
        DeleteJobHistory(job_id=job_id, actor_id="ops", actor_role=ActorRole.ADMIN, reason="gdpr"),
        T0 + timedelta(seconds=5),
    )
    jobs.commit(0, deleted, None)
    assert isinstance(jobs.load(job_id), Unaccepted)
    remaining = jobs.events_of(job_id)
    assert all(isinstance(e, AuditRecorded) or type(e).__name__ == "JobHistoryDeleted" for e in remaining)
    assert len([e for e in remaining if isinstance(e, AuditRecorded)]) == 2  # creation and deletion
    assert jobs.jobs_page([0], JobQuery(), None, 10).items == []
    assert isinstance(JobStore(store, POLICY).load(job_id), Unaccepted)
    # The same log folded into an empty store leaves exactly the same keys and values.
    replayed_store = MemoryStore()
    JobStore(replayed_store, POLICY).commit(0, lifecycle.events, None)
    assert list(replayed_store.scan(b"", b"\xff")) == list(store.scan(b"", b"\xff"))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 10_000), unique=True, max_size=30), min_size=1, max_size=4),
    st.integers(1, 7),
    st.lists(st.integers(1, 9), min_size=4, max_size=4),
)
def test_merged_pages_of_shards_that_stop_early_visit_every_item_once_in_order(shards, limit, budgets):
    everything = sorted(f"{value:015d}/{shard}" for shard, values in enumerate(shards) for value in values)

    def shard_page(index: int, after: str | None) -> Page[str]:
        pending = sorted(f"{value:015d}/{index}" for value in shards[index])
        pending = [at for at in pending if after is None or at > after]
        taken: list[tuple[str, str]] = []
        for examined, at in enumerate(pending):
            if examined >= budgets[index]:
                return Page(taken, pending[examined - 1])
            taken.append((at, at))
            if len(taken) >= limit:
                return Page(taken, at)
        return Page(taken, None)

    seen: list[str] = []
    after = None
    for _ in range(len(everything) + 10):
        page = merge_pages([shard_page(index, after) for index in range(len(shards))], limit)
        seen += [at for at, _ in page.items]
        if page.resume_after is None:
            break
        after = page.resume_after
    assert seen == everything


def test_a_partition_restored_from_its_snapshots_equals_the_folded_one(store):
    """Every key a fold writes (events, timers, lists, counts, audit, artifact refs, tombstones)."""
    folded = JobStore(store, POLICY)
    make_job(folded, 0, 1, outcome=AttemptOutcome.FETCHED)
    make_job(folded, 0, 2, caller="svc-b", outcome=AttemptOutcome.HTTP_ERROR)
    make_job(folded, 0, 3)  # dispatched, with a lease timer
    deleted = make_job(folded, 0, 4, outcome=AttemptOutcome.FETCHED)
    delete = DeleteJobHistory(
        job_id=deleted.job.job_id, actor_id="ops", actor_role=ActorRole.ADMIN, reason="x"
    )
    folded.commit(0, deleted(delete, T0 + timedelta(seconds=9)), 41)
    cut = folded.snapshot_cut(0, limit=100)
    assert cut.complete
    assert cut.events_offset == 41
    assert len(cut.jobs) == 4
    restored_store = MemoryStore()
    JobStore(restored_store, POLICY).restore(0, cut.jobs, cut.events_offset)
    state = [(k, v) for k, v in store.scan(b"", b"\xff") if not k.startswith(b"s/")]
    assert list(restored_store.scan(b"", b"\xff")) == state
    folded.snapshotted(cut, {})
    assert folded.snapshot_cut(0, limit=100).jobs == {}


def test_a_job_changed_after_its_cut_is_snapshotted_again(store):
    jobs = JobStore(store, POLICY)
    lifecycle = make_job(jobs, 0, 1)
    cut = jobs.snapshot_cut(0, limit=100)
    jobs.commit(0, lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)), T0), 7)
    jobs.snapshotted(cut, {})
    assert list(jobs.snapshot_cut(0, limit=100).jobs) == [lifecycle.job.job_id]
