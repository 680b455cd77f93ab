"""Callback delivery rules: one try at a time, retries as events, bounded in attempts and time."""

from datetime import timedelta
from uuid import uuid4

from projections.lifecycle.consequences import consequences_of, next_due_at
from projections.views import callback_log
from schemas.commands import ReplayCallback, ReportCallback
from schemas.enums import ActorRole, AuditAction, AuditOutcome
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


def replay(lifecycle, role=ActorRole.OPERATOR, callback_url=None):
    return ReplayCallback(
        command_id=uuid4(),
        job_id=lifecycle.job.job_id,
        actor_id="ops",
        actor_role=role,
        reason="the receiver was down",
        callback_url=callback_url,
    )


def abandoned(**overrides):
    lifecycle = finished(**overrides)
    lifecycle(callback_report(lifecycle, delivered=False, retryable=False, last_error="HTTP 503"))
    assert kinds(lifecycle.events)[-1] == "CallbackAbandoned"
    return lifecycle


def test_a_replay_delivers_the_completion_again_under_its_first_webhook_id_and_is_audited():
    lifecycle = abandoned()
    first = next(event for event in lifecycle.events if type(event).__name__ == "JobSucceeded")
    webhook_id = lifecycle.job.completion_webhook_id
    assert webhook_id == f"msg_{first.event_id.hex}"
    before = lifecycle.state
    events = lifecycle(replay(lifecycle))
    assert kinds(events) == ["CallbackReplayed", "AuditRecorded"]
    assert events[0].webhook_id == webhook_id
    assert events[0].callback_url == "https://hooks.example/done"
    assert events[1].action is AuditAction.CALLBACK_REPLAY
    (due,) = consequences_of(lifecycle.state, events, POLICY, before).callbacks
    assert (due.webhook_id, due.attempt_number, due.callback_url) == (
        webhook_id,
        1,
        "https://hooks.example/done",
    )
    assert due.completion.status.value == "SUCCEEDED"
    delivered = lifecycle(callback_report(lifecycle, delivered=True, http_status=204))
    assert kinds(delivered) == ["CallbackDelivered"]
    assert delivered[0].webhook_id == webhook_id
    assert lifecycle.job.callbacks == ()
    lifecycle(replay(lifecycle))
    (again,) = lifecycle.job.callbacks
    assert (again.webhook_id, again.due.replay) == (webhook_id, 2)  # its tries are reported apart


def test_a_replay_may_go_to_another_receiver():
    lifecycle = abandoned()
    events = lifecycle(replay(lifecycle, callback_url="https://standby.example/hooks"))
    assert events[0].callback_url == "https://standby.example/hooks"
    (pending,) = lifecycle.job.callbacks
    assert pending.due.callback_url == "https://standby.example/hooks"


def test_a_replay_is_refused_to_services_and_viewers_while_running_or_delivering_and_without_a_url():
    lifecycle = abandoned()
    for role in (ActorRole.SERVICE, ActorRole.VIEWER):
        refused = lifecycle(replay(lifecycle, role=role))
        assert kinds(refused) == ["AuditRecorded"]
        assert refused[0].outcome is AuditOutcome.DENIED
    running = Lifecycle()
    running(submit(callback_url="https://hooks.example/done"))
    assert "its callback is sent when it ends" in running(replay(running))[0].detail
    delivering = finished()
    assert "still being delivered" in delivering(replay(delivering))[0].detail
    no_url = Lifecycle()
    no_url(submit())
    no_url(report(no_url.job, attempt_under(no_url.job)))
    assert "no callback URL" in no_url(replay(no_url))[0].detail
    assert "not an absolute http(s) URL" in no_url(replay(no_url, callback_url="ftp://x/"))[0].detail
    assert kinds(no_url(replay(no_url, callback_url="https://late.example/h"))) == [
        "CallbackReplayed",
        "AuditRecorded",
    ]


def test_a_failed_or_abandoned_try_keeps_the_receivers_answer_and_the_log_shows_it():
    lifecycle = finished()
    failed = lifecycle(callback_report(lifecycle, False, http_status=500, last_error="HTTP 500"))
    assert failed[0].http_status == 500
    lifecycle(tick(lifecycle.job.job_id), failed[0].next_attempt_at)
    hostile = callback_report(lifecycle, False, retryable=False, http_status=7_000, last_error="HTTP ?")
    (abandoned,) = lifecycle(hostile, failed[0].next_attempt_at)
    assert abandoned.http_status is None  # no HTTP status at all: not one to show
    first, second = callback_log(lifecycle.events)
    assert (first.outcome, first.http_status, first.error) == ("failed", 500, "HTTP 500")
    assert (second.outcome, second.http_status) == ("abandoned", None)
