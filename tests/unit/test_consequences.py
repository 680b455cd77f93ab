from datetime import timedelta

from projections.lifecycle.consequences import consequences_of, next_due_at
from projections.lifecycle.policy import renew_interval_ms
from schemas.enums import AttemptOutcome, JobStatus
from tests.lifecycle import ARTIFACT, POLICY, T0, Lifecycle, attempt_under, failure, report, submit, tick


def test_a_dispatch_becomes_due_work_carrying_its_lease_and_renewal_interval():
    lifecycle = Lifecycle()
    events = lifecycle(submit())
    (work,) = consequences_of(lifecycle.job, events, POLICY).due
    assert (work.attempt_number, work.lease_id) == (1, lifecycle.job.lease.lease_id)
    assert work.lease_expires_at == lifecycle.job.lease.lease_expires_at
    assert work.renew_interval_ms == renew_interval_ms(40_000)
    assert work.request == lifecycle.job.accepted.request
    assert work.start_by == T0 + timedelta(milliseconds=POLICY.start_window_ms)


def test_a_terminal_event_becomes_one_completion_and_its_callback():
    lifecycle = Lifecycle()
    lifecycle(submit(callback_url="https://hooks.example/done"))
    events = lifecycle(report(lifecycle.job, attempt_under(lifecycle.job, artifacts=(ARTIFACT,))))
    result = consequences_of(lifecycle.job, events, POLICY)
    (completion,) = result.completions
    (callback,) = result.callbacks
    assert completion.status is JobStatus.SUCCEEDED
    assert completion.artifacts == (ARTIFACT,)
    assert callback.completion == completion
    assert callback.webhook_id == f"msg_{events[-1].event_id.hex}"
    assert result.due == []


def test_no_callback_is_due_without_a_callback_url():
    lifecycle = Lifecycle()
    lifecycle(submit())
    events = lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)))
    assert consequences_of(lifecycle.job, events, POLICY).callbacks == []


def test_the_next_timer_is_the_lease_expiry_then_the_retry_then_none():
    lifecycle = Lifecycle()
    lifecycle(submit())
    assert next_due_at(lifecycle.job, POLICY) == lifecycle.job.lease.lease_expires_at
    lifecycle(
        report(lifecycle.job, attempt_under(lifecycle.job, AttemptOutcome.HTTP_ERROR, failure=failure()))
    )
    assert next_due_at(lifecycle.job, POLICY) == T0 + timedelta(seconds=1)
    lifecycle(tick(lifecycle.job.job_id), T0 + timedelta(seconds=1))
    lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)))
    assert next_due_at(lifecycle.job, POLICY) is None
