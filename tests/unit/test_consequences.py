from datetime import timedelta
from uuid import uuid4

from hypothesis import given
from hypothesis import strategies as st

from projections.lifecycle.consequences import consequences_of, next_due_at
from projections.lifecycle.policy import renew_interval_ms
from projections.lifecycle.state import Job
from schemas.commands import CancelJob
from schemas.enums import ActorRole, AttemptOutcome, JobStatus
from tests.lifecycle import (
    ARTIFACT,
    POLICY,
    T0,
    Lifecycle,
    attempt_under,
    failure,
    renew,
    report,
    start,
    submit,
    tick,
)


def cancelled(job: Job) -> CancelJob:
    return CancelJob(
        job_id=job.job_id, actor_id="ops", actor_role=ActorRole.ADMIN, reason="r", command_id=uuid4()
    )


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


@given(st.sampled_from(["renew", "start"]))
def test_a_stale_start_or_renewal_revokes_the_lease_its_executor_still_runs_under(kind: str):
    lifecycle = Lifecycle()
    lifecycle(submit())
    leased = lifecycle.job
    lifecycle(cancelled(leased))
    events = lifecycle(renew(leased) if kind == "renew" else start(leased))
    (revoked,) = consequences_of(lifecycle.state, events, POLICY).revoked
    assert leased.lease is not None
    assert (revoked.job_id, revoked.lease_id) == (leased.job_id, leased.lease.lease_id)


def test_a_stale_report_revokes_nothing_its_executor_has_finished():
    lifecycle = Lifecycle()
    lifecycle(submit())
    leased = lifecycle.job
    lifecycle(cancelled(leased))
    events = lifecycle(report(leased, attempt_under(leased)))
    assert [type(e).__name__ for e in events] == ["StaleReportIgnored"]
    assert consequences_of(lifecycle.state, events, POLICY).revoked == []


@given(st.booleans())
def test_cancelling_a_leased_job_revokes_its_lease_at_once(started: bool):
    lifecycle = Lifecycle()
    lifecycle(submit())
    if started:
        lifecycle(start(lifecycle.job))
    leased = lifecycle.job
    before = lifecycle.state
    events = lifecycle(cancelled(leased))
    (revoked,) = consequences_of(lifecycle.state, events, POLICY, before).revoked
    assert leased.lease is not None
    assert (revoked.job_id, revoked.lease_id, revoked.attempt_number) == (
        leased.job_id,
        leased.lease.lease_id,
        leased.lease.attempt_number,
    )


def test_cancelling_a_job_waiting_for_its_retry_revokes_nothing():
    lifecycle = Lifecycle()
    lifecycle(submit())
    lifecycle(
        report(lifecycle.job, attempt_under(lifecycle.job, AttemptOutcome.HTTP_ERROR, failure=failure()))
    )
    assert lifecycle.job.lease is None
    before = lifecycle.state
    events = lifecycle(cancelled(lifecycle.job))
    assert consequences_of(lifecycle.state, events, POLICY, before).revoked == []


def test_a_current_renewal_revokes_nothing():
    lifecycle = Lifecycle()
    lifecycle(submit())
    lifecycle(start(lifecycle.job))
    events = lifecycle(renew(lifecycle.job))
    assert consequences_of(lifecycle.state, events, POLICY).revoked == []
