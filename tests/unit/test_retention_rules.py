"""Retention: which histories maintenance may purge, what points at a stored object, and when it goes."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from projections.artifacts import (
    Pointers,
    artifact_id_for,
    content_key,
    expired_if_written_before,
    is_content_key,
    reference_key,
    removable_if_written_before,
    retention_expiry,
)
from projections.lifecycle.consequences import consequences_of
from projections.lifecycle.mutations import retention_expired
from schemas.enums import AttemptOutcome, JobStatus, RetentionClass
from schemas.records import Artifact
from schemas.types import to_utc_millis
from tests.lifecycle import POLICY, T0, Lifecycle, attempt_under, report, submit
from tests.unit.test_mutation_rules import dead_lettered, delete

SHA = "ab" * 32
OLDEST = datetime(2000, 1, 1)  # noqa: DTZ001 - hypothesis bounds are naive; the zone is given apart
NEWEST = datetime(2100, 1, 1)  # noqa: DTZ001


def test_a_finished_job_is_purged_only_once_it_completed_before_the_cutoff():
    lifecycle = dead_lettered()
    completed_at = lifecycle.job.completed_at
    assert completed_at is not None
    assert retention_expired(lifecycle.job, completed_at)
    assert not retention_expired(lifecycle.job, completed_at - timedelta(milliseconds=1))


@given(st.integers(min_value=0, max_value=10_000))
def test_a_job_that_can_still_run_is_never_purged(days: int):
    lifecycle = Lifecycle()
    lifecycle(submit())
    assert lifecycle.job.status is not JobStatus.SUCCEEDED
    assert not retention_expired(lifecycle.job, lifecycle.job.accepted.occurred_at + timedelta(days=days))


def test_a_job_owing_a_callback_keeps_its_history():
    lifecycle = Lifecycle()
    lifecycle(submit(callback_url="https://receiver.example/hook"))
    lifecycle(report(lifecycle.job, attempt_under(lifecycle.job, AttemptOutcome.FETCHED)))
    assert lifecycle.job.is_terminal
    assert lifecycle.job.callbacks
    assert not retention_expired(lifecycle.job, datetime.max.replace(tzinfo=UTC))


@given(
    st.sampled_from(list(RetentionClass)),
    st.datetimes(min_value=OLDEST, max_value=NEWEST, timezones=st.just(UTC)),
)
def test_an_object_expires_a_class_span_after_its_last_write(retention: RetentionClass, written_at: datetime):
    key = content_key(SHA, retention)
    assert is_content_key(key)
    span = {RetentionClass.TRANSIENT_24H: timedelta(hours=24), RetentionClass.CACHE_7D: timedelta(days=7)}
    if retention not in span:
        assert expired_if_written_before(key, written_at + timedelta(days=36_500)) is None
        return
    just_kept = expired_if_written_before(key, written_at + span[retention])
    just_expired = expired_if_written_before(key, written_at + span[retention] + timedelta(microseconds=1))
    assert just_kept is not None
    assert just_expired is not None
    assert not written_at < just_kept
    assert written_at < just_expired


@given(st.text(max_size=90))
def test_a_foreign_key_never_expires(key: str):
    if not is_content_key(key):
        assert expired_if_written_before(key, datetime(2026, 1, 1, tzinfo=UTC)) is None


GRACE = timedelta(hours=24)


@given(
    st.sampled_from(list(RetentionClass)),
    st.sampled_from(list(Pointers)),
    st.datetimes(min_value=OLDEST, max_value=NEWEST, timezones=st.just(UTC)),
)
def test_an_object_goes_only_once_nothing_live_points_at_it_and_the_grace_has_passed(
    retention: RetentionClass, pointers: Pointers, now: datetime
):
    cutoff = removable_if_written_before(content_key(SHA, retention), pointers, now, GRACE)
    if pointers is Pointers.LIVE:
        assert cutoff is None
        return
    assert cutoff is not None
    assert cutoff <= now - GRACE  # an object just stored, its reference on the way, stays
    class_cutoff = expired_if_written_before(content_key(SHA, retention), now)
    if pointers is Pointers.LAPSED and class_cutoff is not None:
        assert cutoff <= class_cutoff
    if pointers is Pointers.NONE:
        assert cutoff == now - GRACE  # an orphan of any class, archived ones too


@given(st.text(max_size=90), st.sampled_from(list(Pointers)))
def test_a_foreign_object_is_never_removed(key: str, pointers: Pointers):
    if not is_content_key(key):
        assert removable_if_written_before(key, pointers, datetime(2026, 1, 1, tzinfo=UTC), GRACE) is None


def stored(retention: RetentionClass, digest: str = SHA) -> Artifact:
    key = content_key(digest, retention)
    expires_at = retention_expiry(retention, T0)
    return Artifact(
        artifact_id=artifact_id_for(key),
        key=key,
        content_type="text/html",
        size_bytes=10,
        sha256=digest,
        expires_at=None if expires_at is None else to_utc_millis(expires_at),
    )


@given(st.lists(st.sampled_from(list(RetentionClass)), min_size=1, max_size=3))
def test_every_artifact_an_attempt_records_is_referenced_until_the_history_is_deleted(
    classes: list[RetentionClass],
):
    lifecycle = Lifecycle()
    lifecycle(submit())
    artifacts = tuple(stored(retention, f"{index:02x}" * 32) for index, retention in enumerate(classes))
    job = lifecycle.job
    events = lifecycle(report(job, attempt_under(job, AttemptOutcome.FETCHED, artifacts=artifacts)))
    references = consequences_of(lifecycle.state, events, POLICY).references
    assert [(r.artifact_key, r.job_id, r.expires_at) for r in references] == [
        (a.key, job.job_id, a.expires_at) for a in artifacts
    ]
    before = lifecycle.state
    events = lifecycle(delete(job.job_id))
    released = consequences_of(lifecycle.state, events, POLICY, before).released
    assert sorted(released) == sorted({reference_key(a.key, job.job_id) for a in artifacts})


def test_a_refused_deletion_releases_nothing():
    lifecycle = Lifecycle()
    lifecycle(submit())
    before = lifecycle.state
    events = lifecycle(delete(lifecycle.job.job_id))  # the job can still run: refused
    assert consequences_of(lifecycle.state, events, POLICY, before).released == []
