"""Audit retention: old audit records of a history are purged by an event, and the store forgets them."""

from datetime import timedelta
from uuid import uuid4

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.jobstore import JobStore
from projections.lifecycle.identity import audit_stream_id
from projections.storage.memory import MemoryStore
from schemas.commands import PurgeAuditRecords, RecordAudit
from schemas.enums import ActorRole
from schemas.events import AuditRecorded, AuditRecordsPurged
from streams.readers.replay import first_difference
from tests.lifecycle import POLICY, T0, Lifecycle, audit_command, kinds, submit

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
