"""The response cache's rules: which attempts make entries, until when, and which jobs they answer."""

from datetime import timedelta
from uuid import uuid4

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.artifacts import content_key
from projections.lifecycle.attempts import recorded_attempt
from projections.lifecycle.cache import (
    ResponseCaps,
    answers,
    cache_entry,
    cache_key,
    cached_outcome,
    revalidation_headers,
)
from projections.lifecycle.consequences import consequences_of
from projections.lifecycle.state import accepted_job
from projections.views import own_events
from schemas.enums import AttemptOutcome, CacheMode, CaptureMode, RetentionClass
from schemas.records import Artifact
from tests.lifecycle import POLICY, T0, Lifecycle, attempt_under, failure, report, submit


def leased_job():  # type: ignore[no-untyped-def]
    lifecycle = Lifecycle()
    lifecycle(submit())
    return lifecycle, accepted_job(lifecycle.state)


CACHE_7D = RetentionClass.CACHE_7D
CAPS = ResponseCaps(max_body_bytes=10 * 2**20, max_decoded_bytes=20 * 2**20)


def artifact(
    expires_in: timedelta | None = timedelta(days=7), stored_as: RetentionClass = CACHE_7D
) -> Artifact:
    return Artifact(
        artifact_id=uuid4(),
        key=content_key("ab" * 32, stored_as),
        content_type="text/html",
        size_bytes=10,
        sha256="ab" * 32,
        expires_at=None if expires_in is None else T0 + expires_in,
    )


def test_a_fetched_page_makes_an_entry_that_answers_reuse_valid_until_it_expires():
    lifecycle, job = leased_job()
    attempt = attempt_under(job, http_status=200, artifacts=(artifact(),), etag='"v1"')
    events = lifecycle(report(job, attempt))
    (entry,) = consequences_of(lifecycle.state, events, POLICY).cache_entries
    assert entry.request_hash == job.accepted.request_hash
    assert entry.expires_at == T0 + timedelta(days=7)
    assert entry.etag == '"v1"'
    assert answers(entry, CacheMode.REUSE_VALID, CACHE_7D, T0 + timedelta(days=6), CAPS, {})
    assert not answers(entry, CacheMode.REUSE_VALID, CACHE_7D, T0 + timedelta(days=7), CAPS, {})
    assert not answers(entry, CacheMode.BYPASS, CACHE_7D, T0, CAPS, {})
    assert cached_outcome(entry, T0) == (AttemptOutcome.CACHE_HIT, None)


@given(
    artifact_days=st.one_of(st.none(), st.integers(1, 30)),
    fresh_ms=st.one_of(st.none(), st.integers(1, 30 * 86_400_000), st.integers(1, 2**63 - 1)),
)
def test_an_entry_expires_at_the_earliest_of_seven_days_its_artifacts_and_the_origins_freshness(
    artifact_days, fresh_ms
):
    _, job = leased_job()
    stored = artifact(None if artifact_days is None else timedelta(days=artifact_days))
    entry = cache_entry(job, attempt_under(job, http_status=200, artifacts=(stored,), fresh_for_ms=fresh_ms))
    limits = [T0 + timedelta(days=7)]
    limits += [] if stored.expires_at is None else [stored.expires_at]
    limits += [] if fresh_ms is None else [T0 + timedelta(milliseconds=min(fresh_ms, 7 * 86_400_000))]
    assert entry is not None
    assert entry.expires_at == min(limits)


def test_what_the_origin_forbids_storing_or_says_is_stale_makes_no_entry():
    _, job = leased_job()
    assert (
        cache_entry(job, attempt_under(job, http_status=200, artifacts=(artifact(),), storable=False)) is None
    )
    assert (
        cache_entry(job, attempt_under(job, http_status=200, artifacts=(artifact(),), fresh_for_ms=0)) is None
    )


def test_a_metadata_only_answer_is_an_entry_under_its_own_key_that_answers_as_a_hit():
    lifecycle = Lifecycle()
    lifecycle(submit(capture_mode=CaptureMode.METADATA_ONLY))
    job = accepted_job(lifecycle.state)
    events = lifecycle(report(job, attempt_under(job, http_status=200)))
    (entry,) = consequences_of(lifecycle.state, events, POLICY).cache_entries
    assert entry.request_hash == cache_key(job.accepted.request_hash, CaptureMode.METADATA_ONLY)
    assert entry.artifacts == ()
    assert cached_outcome(entry, T0) == (AttemptOutcome.CACHE_HIT, None)
    assert entry.expires_at == T0 + timedelta(days=7)


def test_a_transient_metadata_only_answer_is_kept_no_longer_than_its_class():
    lifecycle = Lifecycle()
    lifecycle(submit(capture_mode=CaptureMode.METADATA_ONLY, retention_class=RetentionClass.TRANSIENT_24H))
    job = accepted_job(lifecycle.state)
    events = lifecycle(report(job, attempt_under(job, http_status=200)))
    (entry,) = consequences_of(lifecycle.state, events, POLICY).cache_entries
    assert entry.expires_at == T0 + timedelta(hours=24)


@given(st.text(alphabet="0123456789abcdef", min_size=64, max_size=64), st.sampled_from(CaptureMode))
def test_only_metadata_only_answers_are_kept_apart_and_their_key_is_a_request_hash_of_its_own(
    request_hash, mode
):
    key = cache_key(request_hash, mode)
    assert (key != request_hash) is (mode is CaptureMode.METADATA_ONLY)
    assert len(key) == 64
    assert set(key) <= set("0123456789abcdef")


def test_a_cache_hit_makes_no_new_entry():
    _, job = leased_job()
    hit = attempt_under(
        job, AttemptOutcome.CACHE_HIT, http_status=200, artifacts=(artifact(),), from_cache=True
    )
    assert cache_entry(job, hit) is None


def test_401_403_404_410_are_kept_for_an_hour_without_a_body_and_end_jobs_with_their_status():
    _, job = leased_job()
    for status in (401, 403, 404, 410):
        denied = attempt_under(
            job,
            AttemptOutcome.HTTP_ERROR,
            http_status=status,
            failure=failure(f"HTTP_{status}", retryable=False),
        )
        entry = cache_entry(job, denied)
        assert entry is not None
        assert entry.artifacts == ()
        assert entry.expires_at == T0 + timedelta(hours=1)
        assert answers(entry, CacheMode.REUSE_VALID, CACHE_7D, T0 + timedelta(minutes=59), CAPS, {})
        assert not answers(entry, CacheMode.REUSE_VALID, CACHE_7D, T0 + timedelta(hours=1), CAPS, {})
        outcome, cached_failure = cached_outcome(entry, T0)
        assert outcome is AttemptOutcome.HTTP_ERROR
        assert cached_failure is not None
        assert cached_failure.code == f"HTTP_{status}"


def test_other_failures_make_no_entry():
    _, job = leased_job()
    for status in (500, 429, 400):
        failed = attempt_under(
            job, AttemptOutcome.HTTP_ERROR, http_status=status, failure=failure(f"HTTP_{status}")
        )
        assert cache_entry(job, failed) is None
    assert cache_entry(job, attempt_under(job, AttemptOutcome.TIMEOUT, failure=failure("TIMEOUT"))) is None


def test_revalidation_sends_the_stored_validators_and_a_304_renews_the_entry():
    _, job = leased_job()
    stored = artifact()
    fetched = attempt_under(
        job, http_status=200, artifacts=(stored,), etag='"v1"', last_modified="Mon, 30 Nov 2026 10:00:00 GMT"
    )
    entry = cache_entry(job, fetched)
    assert revalidation_headers(entry, CacheMode.REVALIDATE, CACHE_7D, T0, CAPS, {}) == {
        "If-None-Match": '"v1"',
        "If-Modified-Since": "Mon, 30 Nov 2026 10:00:00 GMT",
    }
    assert revalidation_headers(entry, CacheMode.REUSE_VALID, CACHE_7D, T0, CAPS, {}) == {}
    assert revalidation_headers(None, CacheMode.REVALIDATE, CACHE_7D, T0, CAPS, {}) == {}
    confirmed = attempt_under(
        job, AttemptOutcome.NOT_MODIFIED, http_status=304, artifacts=(stored,), etag='"v1"',
        finished_at=T0 + timedelta(hours=2),
    )  # fmt: skip
    renewed = cache_entry(job, confirmed)
    assert renewed is not None
    assert renewed.http_status == 200
    assert renewed.artifacts == (stored,)
    assert renewed.stored_at == T0 + timedelta(hours=2)


@given(stored_as=st.sampled_from(RetentionClass), asked=st.sampled_from(RetentionClass))
def test_an_entry_answers_only_jobs_that_ask_for_no_longer_retention_than_its_artifacts_have(
    stored_as, asked
):
    _, job = leased_job()
    stored = artifact(stored_as=stored_as)
    entry = cache_entry(job, attempt_under(job, http_status=200, artifacts=(stored,), etag='"v1"'))
    order = [RetentionClass.TRANSIENT_24H, RetentionClass.CACHE_7D, RetentionClass.REFERENCED_ARCHIVE]
    long_enough = order.index(stored_as) >= order.index(asked)
    assert answers(entry, CacheMode.REUSE_VALID, asked, T0, CAPS, {}) is long_enough
    assert bool(revalidation_headers(entry, CacheMode.REVALIDATE, asked, T0, CAPS, {})) is long_enough


def test_artifacts_under_a_foreign_key_are_kept_long_enough_for_any_job():
    _, job = leased_job()
    foreign = msgspec.structs.replace(artifact(), key="imported/page.html")
    entry = cache_entry(job, attempt_under(job, http_status=200, artifacts=(foreign,)))
    assert answers(entry, CacheMode.REUSE_VALID, RetentionClass.REFERENCED_ARCHIVE, T0, CAPS, {})


def test_an_entry_answers_only_jobs_whose_policy_class_allows_its_size():
    _, job = leased_job()
    big = msgspec.structs.replace(artifact(), size_bytes=3 * 2**20)
    entry = cache_entry(job, attempt_under(job, http_status=200, artifacts=(big,), bytes=3 * 2**20))
    strict = ResponseCaps(max_body_bytes=2 * 2**20, max_decoded_bytes=4 * 2**20)
    assert answers(entry, CacheMode.REUSE_VALID, CACHE_7D, T0, CAPS, {})
    assert not answers(entry, CacheMode.REUSE_VALID, CACHE_7D, T0, strict, {})
    assert revalidation_headers(entry, CacheMode.REVALIDATE, CACHE_7D, T0, strict, {}) == {}


def test_a_no_cache_response_is_stored_but_every_use_is_validated_first():
    _, job = leased_job()
    fetched = attempt_under(job, http_status=200, artifacts=(artifact(),), etag='"v1"', must_revalidate=True)
    entry = cache_entry(job, fetched)
    assert entry is not None
    assert entry.must_revalidate
    assert not answers(entry, CacheMode.REUSE_VALID, CACHE_7D, T0, CAPS, {})
    assert revalidation_headers(entry, CacheMode.REUSE_VALID, CACHE_7D, T0, CAPS, {}) == {
        "If-None-Match": '"v1"'
    }


@pytest.mark.parametrize(
    "request_headers",
    [{"cache-control": "no-cache"}, {"cache-control": "max-age=0"}, {"pragma": "no-cache"}],
)
def test_a_request_that_asks_for_validation_is_never_answered_unvalidated(request_headers):
    _, job = leased_job()
    entry = cache_entry(job, attempt_under(job, http_status=200, artifacts=(artifact(),), etag='"v1"'))
    assert not answers(entry, CacheMode.REUSE_VALID, CACHE_7D, T0, CAPS, request_headers)
    validators = revalidation_headers(entry, CacheMode.REUSE_VALID, CACHE_7D, T0, CAPS, request_headers)
    assert validators == {"If-None-Match": '"v1"'}


def test_a_negative_answer_that_must_be_validated_is_not_kept():
    _, job = leased_job()
    gone = attempt_under(
        job, AttemptOutcome.HTTP_ERROR, http_status=404, failure=failure("HTTP_404"), must_revalidate=True
    )
    assert cache_entry(job, gone) is None


def test_a_reader_of_its_own_jobs_sees_no_trace_of_the_job_whose_entry_answered_a_success():
    lifecycle, job = leased_job()
    writer = uuid4()
    hit = attempt_under(
        job,
        AttemptOutcome.CACHE_HIT,
        http_status=200,
        artifacts=(artifact(),),
        from_cache=True,
        cached_at=T0,
        cache_entry_job_id=writer,
    )
    lifecycle(report(job, hit))
    events = lifecycle.events
    assert any(a.cache_entry_job_id == writer for e in events if (a := recorded_attempt(e)))
    shown = [a for e in own_events(events) if (a := recorded_attempt(e)) is not None]
    assert [(a.from_cache, a.cached_at, a.cache_entry_job_id) for a in shown] == [(True, None, None)]
