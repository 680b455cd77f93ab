"""Audit retention: old audit records of a history are purged by an event, and the store forgets them."""

from datetime import timedelta
from uuid import uuid4

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.jobstore import JobStore
from projections.lifecycle.audit import audit_id_of, audit_of, listed_as_audit
from projections.lifecycle.identity import audit_stream_id
from projections.lifecycle.state import accepted_job
from projections.storage.memory import MemoryStore
from schemas.commands import DeleteJobHistory, PurgeAuditRecords, RecordAudit
from schemas.enums import ActorRole, AuditAction
from schemas.events import AuditRecorded, AuditRecordsPurged, JobAccepted
from streams.readers.replay import first_difference
from tests.lifecycle import POLICY, T0, Lifecycle, attempt_under, audit_command, kinds, report, submit

DAY = timedelta(days=1)


def purge(job_id, before, role=ActorRole.ADMIN) -> PurgeAuditRecords:  # type: ignore[no-untyped-def]
    return PurgeAuditRecords(
        command_id=uuid4(),
        job_id=job_id,
        before=before,
        actor_id="maint",
        actor_role=role,
        reason="retention",
    )


def read_audit(stream) -> RecordAudit:  # type: ignore[no-untyped-def]
    return audit_command(stream)


def test_an_admin_purge_is_an_event_that_never_reaches_into_the_current_hour():
    lifecycle = Lifecycle()
    lifecycle(submit())
    now = T0 + 2 * DAY + timedelta(minutes=30)
    (purged,) = lifecycle(purge(lifecycle.job.job_id, now), now)
    assert isinstance(purged, AuditRecordsPurged)
    assert purged.before == T0 + 2 * DAY  # the start of the hour it was decided in
    assert kinds(lifecycle(purge(lifecycle.job.job_id, T0 + DAY, ActorRole.OPERATOR), now)) == []
    assert kinds(Lifecycle()(purge(uuid4(), T0 + DAY), now)) == []  # nothing to purge in no history


def test_the_store_forgets_purged_audit_records_keeps_the_rest_and_a_replay_agrees():
    lifecycle = Lifecycle()
    lifecycle(submit())
    job_id = lifecycle.job.job_id
    stream = audit_stream_id("svc-b", T0)
    audits = Lifecycle()
    for at in (T0, T0 + timedelta(minutes=5)):
        audits(read_audit(stream), at)
    stream_events = list(audits.events)
    purges = [lifecycle(purge(job_id, T0 + DAY), T0 + 2 * DAY)]
    live = JobStore(MemoryStore(), POLICY)
    live.commit(0, lifecycle.events[:-1], next_offset=1)
    live.commit(0, stream_events[:1], next_offset=2)
    live.commit(0, stream_events[1:2], next_offset=3)
    stream_purge = audits(purge(stream, T0 + DAY), T0 + 2 * DAY)
    live.commit(0, purges[0] + stream_purge, next_offset=4)
    assert not [e for e in live.events_of(job_id) if isinstance(e, AuditRecorded)]
    assert [type(e).__name__ for e in live.events_of(stream)] == ["AuditRecordsPurged"]
    assert live.audit_page([0], lambda _: True, None, 100).items == []
    assert live.load_job(job_id) is not None
    live.forget_cached()
    assert live.load(stream) is not None  # its first event is gone, its id is still known
    assert live.load(stream).sequence == 3
    rebuilt = JobStore(MemoryStore(), POLICY)
    rebuilt.commit(0, lifecycle.events[:-1] + stream_events[:2] + purges[0] + stream_purge, next_offset=4)
    assert first_difference(live._store, rebuilt._store) is None
    restored = JobStore(MemoryStore(), POLICY)  # from a snapshot of the store: the same
    restored.restore(0, live.snapshot_cut(0, 100).jobs, 4)
    assert restored.load(stream) == live.load(stream)
    assert restored.load_job(job_id) == live.load_job(job_id)


@settings(deadline=None)  # a store per example: slow on a busy machine, never wrong
@given(st.lists(st.integers(min_value=0, max_value=72), min_size=1, max_size=6), st.integers(0, 80))
def test_exactly_the_records_older_than_the_purge_go(hours, cut):
    stream = audit_stream_id("svc-b", T0)
    lifecycle = Lifecycle()
    for hour in sorted(hours):
        lifecycle(read_audit(stream), T0 + timedelta(hours=hour))
    written = list(lifecycle.events)
    lifecycle(purge(stream, T0 + timedelta(hours=cut)), T0 + timedelta(days=5))
    store = JobStore(MemoryStore(), POLICY)
    store.commit(0, lifecycle.events, next_offset=1)
    kept = [e for e in store.events_of(stream) if isinstance(e, AuditRecorded)]
    assert kept == [e for e in written if e.occurred_at >= T0 + timedelta(hours=cut)]
    assert len(store.audit_page([0], lambda _: True, None, 100).items) == len(kept)
    assert store.audited_before(0, T0 + timedelta(hours=cut), 10) == []


def delete(job_id) -> DeleteJobHistory:  # type: ignore[no-untyped-def]
    return DeleteJobHistory(job_id=job_id, actor_id="ops", actor_role=ActorRole.ADMIN, reason="gdpr")


def listed(store: JobStore) -> list[AuditRecorded]:
    return [audit for _, audit in store.audit_page([0], lambda _: True, None, 100).items]


def test_a_creation_audited_by_its_acceptance_is_listed_and_outlives_a_deleted_history():
    lifecycle = Lifecycle()
    lifecycle(submit())
    job_id = lifecycle.job.job_id
    lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)))
    store = JobStore(MemoryStore(), POLICY)
    store.commit(0, lifecycle.events, next_offset=1)
    creation = audit_of(lifecycle.events[0])
    assert listed(store) == [creation]
    store.commit(0, lifecycle(delete(job_id), T0 + timedelta(seconds=5)), next_offset=2)
    kept = store.events_of(job_id)
    assert kinds(kept) == ["AuditRecorded", "JobHistoryDeleted", "AuditRecorded"]  # no request is left
    assert kept[0] == creation
    assert [audit.action for audit in listed(store)] == [
        AuditAction.JOB_HISTORY_DELETE,
        AuditAction.JOB_CREATE,
    ]
    at_once = JobStore(MemoryStore(), POLICY)  # accepted and deleted in one fold: the same store
    at_once.commit(0, lifecycle.events, next_offset=2)
    assert first_difference(store._store, at_once._store) is None


def test_a_purged_creation_audit_leaves_its_job_and_does_not_return_with_a_deletion():
    lifecycle = Lifecycle()
    lifecycle(submit())
    job_id = lifecycle.job.job_id
    lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)))
    lifecycle(purge(job_id, T0 + DAY), T0 + 2 * DAY)
    store = JobStore(MemoryStore(), POLICY)
    store.commit(0, lifecycle.events, next_offset=1)
    assert kinds(store.events_of(job_id))[0] == "JobAccepted"
    assert store.load_job(job_id) is not None
    assert listed(store) == []
    assert store.audited_before(0, T0 + DAY, 10) == []  # maintenance has nothing left to purge
    store.commit(0, lifecycle(delete(job_id), T0 + 2 * DAY), next_offset=2)
    assert [audit.action for audit in listed(store)] == [AuditAction.JOB_HISTORY_DELETE]
    assert [e for e in store.events_of(job_id) if audit_of(e) is not None] == listed(store)
    rebuilt = JobStore(MemoryStore(), POLICY)
    rebuilt.commit(0, lifecycle.events, next_offset=2)
    assert first_difference(store._store, rebuilt._store) is None


def test_a_creation_logged_with_its_own_audit_record_is_listed_once_and_kept_once():
    """As every creation was logged before acceptances stood for their audit records."""
    lifecycle = Lifecycle()
    accepted, *rest = lifecycle(submit())
    rest += lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)))
    creation = audit_of(accepted)
    assert creation is not None
    own = msgspec.structs.replace(creation, event_id=uuid4(), sequence=2)
    older = [accepted, own, *(msgspec.structs.replace(e, sequence=e.sequence + 1) for e in rest)]
    store = JobStore(MemoryStore(), POLICY)
    store.commit(0, older, next_offset=1)
    assert listed(store) == [own]
    lifecycle = Lifecycle(state=store.load(accepted.job_id), events=list(older))
    store.commit(0, lifecycle(delete(accepted.job_id), T0 + timedelta(seconds=5)), next_offset=2)
    kept = [e for e in store.events_of(accepted.job_id) if isinstance(e, AuditRecorded)]
    assert [audit.action for audit in kept] == [AuditAction.JOB_CREATE, AuditAction.JOB_HISTORY_DELETE]
    assert kept[0] == own


STEPS = st.lists(st.sampled_from(["report", "delete", "purge", "resubmit"]), max_size=5)


@settings(deadline=None)
@given(STEPS, st.integers(0, 6), st.integers(1, 4))
def test_a_creation_audit_is_the_same_however_the_log_is_folded_or_restored(steps, cut_hours, chunk):
    """Folded at once, in chunks, or restored from a snapshot: one store; and the creation is listed
    unless a purge reached back past it."""
    lifecycle = Lifecycle()
    lifecycle(submit(idempotency_key="k"))
    job_id = lifecycle.job.job_id
    purged_before = None
    for hour, step in enumerate(steps, start=1):
        at = T0 + timedelta(hours=hour)
        job = accepted_job(lifecycle.state)
        if step == "report" and job is not None and job.lease is not None:
            lifecycle(report(job, attempt_under(job)), at)
        elif step == "delete" and job is not None:
            lifecycle(delete(job_id), at)
        elif step == "purge":
            before = T0 + timedelta(hours=cut_hours)
            if lifecycle(purge(job_id, before), at + DAY):
                purged_before = max(purged_before or before, before)
        elif step == "resubmit":
            lifecycle(submit(idempotency_key="k"), at)
    for event in lifecycle.events:  # the index's key is the listed record's
        audit = audit_of(event)
        assert listed_as_audit(event) == (None if audit is None else (audit.occurred_at, audit.audit_id))
    at_once = JobStore(MemoryStore(), POLICY)
    at_once.commit(0, lifecycle.events, next_offset=len(lifecycle.events))
    chunked = JobStore(MemoryStore(), POLICY)
    for start in range(0, len(lifecycle.events), chunk):
        chunked.commit(0, lifecycle.events[start : start + chunk], next_offset=len(lifecycle.events))
    assert first_difference(at_once._store, chunked._store) is None
    restored = JobStore(MemoryStore(), POLICY)
    restored.restore(0, at_once.snapshot_cut(0, 100).jobs, len(lifecycle.events))
    assert listed(restored) == listed(at_once)
    created = [audit for audit in listed(at_once) if audit.action is AuditAction.JOB_CREATE]
    acceptances = [e for e in lifecycle.events if isinstance(e, JobAccepted)]
    expected = [e for e in acceptances if purged_before is None or e.occurred_at >= purged_before]
    assert sorted(audit.audit_id for audit in created) == sorted(audit_id_of(e.command_id) for e in expected)
