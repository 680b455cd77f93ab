"""`explain` tells each decision of a job with the rule that made it."""

from datetime import timedelta
from uuid import uuid4

from projections.lifecycle.explain import explain, why
from schemas.enums import AttemptOutcome
from tests.lifecycle import T0, Lifecycle, attempt_under, failure, report, submit, tick


def test_a_retry_after_a_503_with_retry_after_then_an_answer_from_the_cache_names_both_causes():
    lifecycle = Lifecycle()
    lifecycle(submit(attempt_limit=3), T0)
    job = lifecycle.job
    asked = T0 + timedelta(seconds=30)
    busy = attempt_under(
        job, AttemptOutcome.HTTP_ERROR, failure=failure("HTTP_503", retry_at=asked), http_status=503
    )
    lifecycle(report(job, busy), T0 + timedelta(seconds=1))
    lifecycle(tick(job.job_id), lifecycle.job.next_attempt_at)
    job = lifecycle.job
    writer = uuid4()
    cached = attempt_under(
        job,
        AttemptOutcome.CACHE_HIT,
        from_cache=True,
        cached_at=T0 + timedelta(seconds=10),
        cache_entry_job_id=writer,
    )
    lifecycle(report(job, cached), asked + timedelta(seconds=1))
    steps = explain(lifecycle.events)
    rules = [step.rule for step in steps]
    assert rules == [
        "submission.accepted",
        "attempt.dispatched",
        "attempt.failed",
        "retry.retry_after",
        "attempt.dispatched",
        "cache.answered",
        "job.succeeded",
    ]
    retry = steps[3].said
    assert "HTTP_503" in retry
    assert f"Retry-After asked to wait until {asked.isoformat()}" in retry
    assert f"by job {writer}" in steps[5].said
    assert [step.sequence for step in steps] == sorted(step.sequence for step in steps)
    assert why("SUCCEEDED", steps).startswith("it is SUCCEEDED because succeeded with attempt 2")


def test_a_retry_later_than_retry_after_says_the_backoff_made_it_later():
    lifecycle = Lifecycle()
    lifecycle(submit(attempt_limit=3), T0)
    at = T0
    for _ in range(2):  # the origin asks for a second; the backoff after attempt 2 is two
        job = lifecycle.job
        soon = at + timedelta(seconds=1)
        busy = attempt_under(
            job, AttemptOutcome.HTTP_ERROR, failure=failure("HTTP_503", retry_at=soon), http_status=503
        )
        lifecycle(report(job, busy), at)
        at = lifecycle.job.next_attempt_at
        assert at is not None
        lifecycle(tick(job.job_id), at)
    retry = [step for step in explain(lifecycle.events) if step.rule.startswith("retry.")][-1]
    assert retry.rule == "retry.retry_after"
    assert "the backoff after attempt 2 is longer, so attempt 3 is due at" in retry.said


def test_a_retry_without_retry_after_is_told_as_backoff():
    lifecycle = Lifecycle()
    lifecycle(submit(attempt_limit=3), T0)
    job = lifecycle.job
    lifecycle(report(job, attempt_under(job, AttemptOutcome.TIMEOUT, failure=failure("TIMEOUT"))), T0)
    (retry,) = [step for step in explain(lifecycle.events) if step.rule.startswith("retry.")]
    assert retry.rule == "retry.backoff"
    assert "TIMEOUT" in retry.said


def test_a_job_no_executor_reported_says_what_it_waits_for_and_what_to_check():
    lifecycle = Lifecycle()
    lifecycle(submit(), T0)
    assert lifecycle.job.lease is not None
    lease_ends = lifecycle.job.lease.lease_expires_at
    told = why("LEASED", explain(lifecycle.events))
    assert told.startswith("it is LEASED because attempt 1 was handed to the executors")
    assert f"by {lease_ends.isoformat()}" in told
    assert "GET /job-types" in told
    assert "accepted" not in told


def test_a_retryable_failure_that_spent_the_budget_is_not_told_as_retried():
    lifecycle = Lifecycle()
    lifecycle(submit(attempt_limit=1), T0)
    job = lifecycle.job
    lifecycle(report(job, attempt_under(job, AttemptOutcome.TIMEOUT, failure=failure("TIMEOUT"))), T0)
    said = [step.said for step in explain(lifecycle.events)]
    assert not any("may be retried" in line or "retried because" in line for line in said), said
    assert said[-1].startswith("dead-lettered, not retried: TIMEOUT")
    assert said[-1].endswith("(attempt budget of 1 spent)")


def test_a_final_failure_says_it_is_not_retried():
    lifecycle = Lifecycle()
    lifecycle(submit(attempt_limit=3), T0)
    job = lifecycle.job
    final = failure("HTTP_404", retryable=False)
    lifecycle(report(job, attempt_under(job, AttemptOutcome.HTTP_ERROR, failure=final, http_status=404)), T0)
    failed = next(step for step in explain(lifecycle.events) if step.rule == "attempt.failed")
    assert failed.said.endswith("a final failure, not retried")
