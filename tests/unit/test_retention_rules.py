"""Retention: which histories maintenance may purge, and when a stored object expires."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from projections.artifacts import content_key, expired_if_written_before, is_content_key
from projections.lifecycle.mutations import retention_expired
from schemas.enums import AttemptOutcome, JobStatus, RetentionClass
from tests.lifecycle import Lifecycle, attempt_under, report, submit
from tests.unit.test_mutation_rules import dead_lettered

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
