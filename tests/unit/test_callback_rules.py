"""Callback delivery rules: one try at a time, retries as events, bounded in attempts and time."""

from datetime import timedelta
from uuid import uuid4

from projections.lifecycle.consequences import consequences_of, next_due_at
from schemas.commands import ReportCallback
from tests.lifecycle import POLICY, T0, Lifecycle, attempt_under, kinds, report, submit, tick


def finished(**overrides):
    lifecycle = Lifecycle()
    lifecycle(submit(callback_url="https://hooks.example/done", **overrides))
    lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)))
    return lifecycle


def callback_report(lifecycle, delivered, retryable=True, attempt_number=None, **fields):
    (pending,) = lifecycle.job.callbacks
    return ReportCallback(
        command_id=uuid4(),
        job_id=lifecycle.job.job_id,
        webhook_id=pending.webhook_id,
        attempt_number=attempt_number or pending.attempt_number,
        delivered=delivered,
        retryable=retryable,
        delivery_attempts=1,
        **fields,
    )


def test_the_terminal_outcome_starts_one_delivery_with_a_stable_webhook_id():
    lifecycle = finished()
    (pending,) = lifecycle.job.callbacks
    assert pending.attempt_number == 1
    assert pending.webhook_id == f"msg_{lifecycle.events[-1].event_id.hex}"


def test_a_delivered_callback_is_recorded_once():
    lifecycle = finished()
    events = lifecycle(callback_report(lifecycle, True, http_status=204))
    assert kinds(events) == ["CallbackDelivered"]
    assert events[0].http_status == 204
    assert lifecycle.job.callbacks == ()
    assert lifecycle.job.callbacks_finished == 1


def test_a_report_before_the_terminal_outcome_changes_nothing():
    lifecycle = Lifecycle()
    lifecycle(submit(callback_url="https://hooks.example/done"))
    command = ReportCallback(
        command_id=uuid4(), job_id=lifecycle.job.job_id, delivered=True, delivery_attempts=1
    )
    assert lifecycle(command) == []


def test_a_transient_failure_schedules_the_next_try_durably_and_its_timer_dispatches_it():
    lifecycle = finished()
    later = T0 + timedelta(seconds=2)
    events = lifecycle(callback_report(lifecycle, False, last_error="DNS_FAILED: no answer"), later)
    assert kinds(events) == ["CallbackRetryScheduled"]
    next_at = events[0].next_attempt_at
    assert next_at == later + POLICY.callbacks.backoff(1)
    assert next_due_at(lifecycle.job, POLICY) == next_at
    assert lifecycle(tick(lifecycle.job.job_id), next_at - timedelta(milliseconds=1)) == []
    dispatched = lifecycle(tick(lifecycle.job.job_id), next_at)
    assert kinds(dispatched) == ["CallbackDispatched"]
    (again,) = consequences_of(lifecycle.job, dispatched, POLICY).callbacks
    assert again.attempt_number == 2
    assert again.webhook_id == lifecycle.job.callbacks[0].webhook_id


def test_a_failure_that_will_not_pass_abandons_the_callback():
    lifecycle = finished()
    events = lifecycle(callback_report(lifecycle, False, retryable=False, last_error="refused: 10.0.0.1"))
    assert kinds(events) == ["CallbackAbandoned"]
    assert events[0].last_error == "refused: 10.0.0.1"


def test_a_callback_is_abandoned_once_the_next_try_would_pass_the_retry_window():
    lifecycle = finished()
    end = T0 + timedelta(milliseconds=POLICY.callbacks.max_elapsed_ms)
    events = lifecycle(callback_report(lifecycle, False, last_error="HTTP 500"), end)
    assert kinds(events) == ["CallbackAbandoned"]


def test_a_report_about_an_earlier_try_changes_nothing():
    lifecycle = finished()
    lifecycle(callback_report(lifecycle, False), T0)
    lifecycle(tick(lifecycle.job.job_id), lifecycle.job.callbacks[0].next_attempt_at)
    assert lifecycle(callback_report(lifecycle, True, attempt_number=1)) == []


def test_an_unreported_try_counts_as_failed_after_its_timeout():
    lifecycle = finished()
    timeout = timedelta(milliseconds=POLICY.callbacks.attempt_timeout_ms + POLICY.lease_grace_ms)
    assert next_due_at(lifecycle.job, POLICY) == T0 + timeout
    events = lifecycle(tick(lifecycle.job.job_id), T0 + timeout)
    assert kinds(events) == ["CallbackRetryScheduled"]
    assert "no report" in events[0].last_error


def test_a_rejection_with_a_callback_url_is_delivered_like_any_outcome():
    from schemas.records import Request

    lifecycle = Lifecycle()
    lifecycle(submit(request=Request(url="ftp://x.example/"), callback_url="https://hooks.example/r"))
    (pending,) = lifecycle.state.callbacks
    command = ReportCallback(
        command_id=uuid4(),
        job_id=lifecycle.state.job_id,
        webhook_id=pending.webhook_id,
        attempt_number=1,
        delivered=True,
        delivery_attempts=1,
    )
    assert kinds(lifecycle(command)) == ["CallbackDelivered"]
