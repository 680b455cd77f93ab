"""One example per lifecycle rule, named after the rule."""

from dataclasses import replace
from datetime import timedelta
from uuid import uuid4, uuid5

import msgspec
import pytest

from projections.lifecycle.attempts import attempt_record_of
from projections.lifecycle.completion import completion_of
from projections.lifecycle.consequences import consequences_of
from projections.lifecycle.decide import decide
from projections.lifecycle.dispatch import dispatch_of
from projections.lifecycle.evolve import replay
from projections.lifecycle.identity import lease_id_for
from projections.lifecycle.outcomes import local_failure
from projections.lifecycle.policy import UNBOUNDED_RUN_LEASE_MS, Policy
from projections.lifecycle.state import Lease, Unaccepted, updated
from projections.lifecycle.submission import submission_identity
from projections.views import job_view
from schemas.commands import CancelJob, RedriveJob
from schemas.enums import (
    ActorRole,
    AttemptOutcome,
    AuditOutcome,
    ExpiryReason,
    JobStatus,
    RejectionReason,
)
from schemas.events import AttemptRecorded
from schemas.records import Request
from tests.lifecycle import (
    ARTIFACT,
    POLICY,
    T0,
    Lifecycle,
    attempt_under,
    failure,
    kinds,
    renew,
    report,
    start,
    submit,
    tick,
)


def accepted(**overrides):
    lifecycle = Lifecycle()
    lifecycle(submit(**overrides))
    return lifecycle


def fail_once(lifecycle, now, **attempt_fields):
    attempt = attempt_under(lifecycle.job, AttemptOutcome.HTTP_ERROR, **attempt_fields)
    return lifecycle(report(lifecycle.job, attempt), now)


def test_valid_submission_is_accepted_and_dispatched_under_a_lease_that_covers_the_start_window():
    lifecycle = Lifecycle()
    events = lifecycle(submit())
    # The acceptance is the creation's audit record and holds the first lease: one event.
    assert kinds(events) == ["JobAccepted"]
    assert events[0].first_lease_expires_at == lifecycle.job.lease.lease_expires_at
    assert lifecycle.job.status is JobStatus.LEASED
    assert lifecycle.job.lease.attempt_number == 1
    assert lifecycle.job.lease.started_at is None
    assert lifecycle.job.lease.lease_expires_at == T0 + timedelta(milliseconds=60_000 + 30_000 + 10_000)
    assert [e.sequence for e in events] == [1]
    (due,) = consequences_of(lifecycle.state, events, lifecycle.policy, None).due
    assert (due.attempt_number, due.lease_id) == (1, lifecycle.job.lease.lease_id)


def test_job_id_is_deterministic_from_caller_and_idempotency_key():
    first, _ = submission_identity(submit(idempotency_key="k1"))
    again, _ = submission_identity(
        submit(idempotency_key="k1", request=Request(url="https://other.example/"))
    )
    other_caller, _ = submission_identity(submit(idempotency_key="k1", caller_identity="svc-b"))
    assert first == again
    assert first != other_caller


def test_idempotency_key_defaults_to_the_canonical_request_hash():
    plain, key = submission_identity(submit(request=Request(url="https://example.com/page")))
    spelled, _ = submission_identity(submit(request=Request(url="HTTPS://Example.COM:443/page#frag")))
    assert plain == spelled
    assert len(key) == 64


def test_repeat_submission_is_reused_and_dispatches_nothing():
    lifecycle = accepted()
    events = lifecycle(submit())
    assert kinds(events) == ["SubmissionReused"]
    assert lifecycle.job.reuse_count == 1
    assert lifecycle.job.dispatch_count == 1


def test_redelivered_command_decides_nothing():
    lifecycle = Lifecycle()
    command = submit()
    lifecycle(command)
    assert lifecycle(command, T0 + timedelta(seconds=5)) == []


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"request": Request(url="ftp://example.com/file")}, RejectionReason.UNSUPPORTED_SCHEME),
        ({"request": Request(url="file:///etc/passwd")}, RejectionReason.UNSUPPORTED_SCHEME),
        ({"request": Request(url="https:///nohost")}, RejectionReason.INVALID_URL),
        ({"request": Request(url="notaurl")}, RejectionReason.INVALID_URL),
        ({"request": Request(url="http://example.com:99999/")}, RejectionReason.INVALID_URL),
        (
            {"request": Request(url="https://e.com/", headers={"Cookie": "x"})},
            RejectionReason.DISALLOWED_HEADER,
        ),
        ({"caller_identity": "  "}, RejectionReason.INVALID_CALLER),
        ({"deadline_at": T0}, RejectionReason.DEADLINE_IN_PAST),
        ({"deadline_at": T0 - timedelta(days=1)}, RejectionReason.DEADLINE_IN_PAST),
        ({"job_type": "ftp.mirror"}, RejectionReason.UNKNOWN_JOB_TYPE),
        ({"attempt_limit": 0}, RejectionReason.ATTEMPT_LIMIT_OUT_OF_RANGE),
        ({"attempt_limit": 4}, RejectionReason.ATTEMPT_LIMIT_OUT_OF_RANGE),
        ({"callback_url": "not a url"}, RejectionReason.INVALID_CALLBACK_URL),
        ({"callback_url": "mailto:ops@example.com"}, RejectionReason.INVALID_CALLBACK_URL),
    ],
)
def test_invalid_submission_is_rejected_with_a_specific_reason(overrides, reason):
    lifecycle = Lifecycle()
    events = lifecycle(submit(**overrides))
    assert kinds(events) == ["JobRejected"]
    assert events[0].reason is reason
    assert events[0].detail
    assert isinstance(lifecycle.state, Unaccepted)


def test_attempt_limit_defaults_to_the_profile_and_may_be_lowered():
    assert accepted().job.accepted.attempt_limit == 3
    assert accepted(attempt_limit=2).job.accepted.attempt_limit == 2
    assert accepted(job_type="browser.render").job.accepted.attempt_limit == 2


def test_success_report_completes_the_job_with_its_artifacts():
    lifecycle = accepted()
    attempt = attempt_under(lifecycle.job, artifacts=(ARTIFACT,))
    events = lifecycle(report(lifecycle.job, attempt))
    assert kinds(events) == ["JobSucceeded"]  # holding its attempt's record
    assert attempt_record_of(events[0]) == AttemptRecorded(
        event_id=uuid5(events[0].event_id, "attempt"),
        job_id=events[0].job_id,
        sequence=events[0].sequence,
        occurred_at=events[0].occurred_at,
        command_id=events[0].command_id,
        attempt=attempt,
    )
    assert lifecycle.job.status is JobStatus.SUCCEEDED
    assert lifecycle.job.attempts == (attempt,)
    assert lifecycle.job.artifacts == (ARTIFACT,)
    completion = completion_of(lifecycle.job)
    assert completion is not None
    assert completion.status is JobStatus.SUCCEEDED
    assert completion.attempt_count == 1


def test_report_for_stale_lease_changes_nothing():
    lifecycle = accepted()
    before = lifecycle.job
    stale = attempt_under(before, lease_id=uuid4())
    events = lifecycle(report(before, stale))
    assert kinds(events) == ["StaleReportIgnored"]
    assert lifecycle.job.status is before.status
    assert lifecycle.job.attempts == ()


def test_report_for_an_earlier_attempt_is_stale_after_redispatch():
    lifecycle = accepted()
    lifecycle(start(lifecycle.job))
    first = lifecycle.job
    lifecycle(tick(first.job_id), first.lease.lease_expires_at)
    lifecycle(tick(first.job_id), lifecycle.job.next_attempt_at)
    assert lifecycle.job.lease.attempt_number == 2
    events = lifecycle(report(first, attempt_under(first)))
    assert kinds(events) == ["StaleReportIgnored"]
    assert lifecycle.job.status is JobStatus.LEASED


def test_renewal_for_stale_lease_changes_nothing():
    lifecycle = accepted()
    before = lifecycle.job
    command = msgspec.structs.replace(renew(before), attempt_number=7)
    assert kinds(lifecycle(command)) == ["StaleReportIgnored"]
    assert lifecycle.job.lease == before.lease


def test_renewal_extends_the_lease_from_now_by_the_derived_lease():
    lifecycle = accepted()
    later = T0 + timedelta(seconds=20)
    assert kinds(lifecycle(renew(lifecycle.job), later)) == ["LeaseRenewed"]
    assert lifecycle.job.lease.lease_expires_at == later + timedelta(seconds=40)


def test_a_type_with_no_runtime_ceiling_renews_its_lease_for_as_long_as_it_runs_until_the_deadline():
    lifecycle = Lifecycle(policy=Policy.from_declared({"test.unbounded": (0, 1)}, POLICY.default_profile))
    lifecycle(submit(job_type="test.unbounded"))
    assert lifecycle.job.accepted.max_runtime_ms == 0
    lease = timedelta(milliseconds=UNBOUNDED_RUN_LEASE_MS + 10_000)
    lifecycle(start(lifecycle.job), T0)
    assert lifecycle.job.lease.lease_expires_at == T0 + lease
    later = T0 + timedelta(minutes=50)  # far past any ceiling: still renewed
    assert kinds(lifecycle(renew(lifecycle.job), later)) == ["LeaseRenewed"]
    assert lifecycle.job.lease.lease_expires_at == later + lease
    near_the_deadline = lifecycle.job.accepted.deadline_at - timedelta(seconds=1)
    lifecycle(renew(lifecycle.job), near_the_deadline)
    assert lifecycle.job.lease.lease_expires_at == lifecycle.job.accepted.deadline_at


def test_starting_the_work_makes_the_lease_run_from_the_start():
    lifecycle = accepted()
    later = T0 + timedelta(seconds=5)
    events = lifecycle(start(lifecycle.job), later)
    assert kinds(events) == ["AttemptStarted"]
    assert lifecycle.job.lease.started_at == later
    assert lifecycle.job.lease.lease_expires_at == later + timedelta(seconds=40)


def test_a_repeated_start_of_the_same_lease_changes_nothing():
    lifecycle = accepted()
    lifecycle(start(lifecycle.job), T0 + timedelta(seconds=5))
    assert lifecycle(start(lifecycle.job), T0 + timedelta(seconds=9)) == []
    assert lifecycle.job.lease.started_at == T0 + timedelta(seconds=5)


def test_a_start_under_another_lease_is_stale():
    lifecycle = accepted()
    command = msgspec.structs.replace(start(lifecycle.job), lease_id=uuid4())
    events = lifecycle(command)
    assert kinds(events) == ["StaleReportIgnored"]
    assert events[0].kind.value == "START"
    assert lifecycle.job.lease.started_at is None


def test_work_no_executor_started_is_redispatched_at_once_and_costs_nothing():
    lifecycle = accepted(attempt_limit=1)
    lease = lifecycle.job.lease
    events = lifecycle(tick(lifecycle.job.job_id), lease.lease_expires_at)
    assert kinds(events) == ["LeaseExpired", "JobDispatched"]
    assert events[0].reason is ExpiryReason.NOT_STARTED
    assert events[1].attempt_number == 2
    assert lifecycle.job.budget_spent == 0
    assert lifecycle.job.status is JobStatus.LEASED


def test_unstarted_work_past_the_deadline_dead_letters_with_job_deadline_exceeded():
    lifecycle = accepted(deadline_at=T0 + timedelta(seconds=30))
    events = lifecycle(tick(lifecycle.job.job_id), lifecycle.job.lease.lease_expires_at)
    assert kinds(events) == ["LeaseExpired", "JobDeadLettered"]
    assert lifecycle.job.failure.code == "JOB_DEADLINE_EXCEEDED"


def test_a_decision_depends_only_on_state_command_and_the_command_time():
    lifecycle = accepted()
    command = tick(lifecycle.job.job_id)
    at = lifecycle.job.lease.lease_expires_at
    first = decide(lifecycle.state, command, at, POLICY)
    assert decide(lifecycle.state, command, at, POLICY) == first
    assert first


def test_retryable_failure_backs_off_exponentially():
    lifecycle = accepted()
    events = fail_once(lifecycle, T0, failure=failure())
    assert kinds(events) == ["AttemptRecorded", "RetryScheduled"]
    assert lifecycle.job.next_attempt_at == T0 + timedelta(seconds=1)
    lifecycle(tick(lifecycle.job.job_id), T0 + timedelta(seconds=1))
    fail_once(lifecycle, T0 + timedelta(seconds=2), failure=failure())
    assert lifecycle.job.next_attempt_at == T0 + timedelta(seconds=2 + 2)


def test_retry_is_never_earlier_than_retry_after():
    lifecycle = accepted()
    retry_after = T0 + timedelta(seconds=30)
    fail_once(lifecycle, T0, failure=failure("HTTP_429", retry_at=retry_after))
    assert lifecycle.job.next_attempt_at == retry_after


def test_retry_timer_before_it_is_due_dispatches_nothing():
    lifecycle = accepted()
    fail_once(lifecycle, T0, failure=failure())
    assert lifecycle(tick(lifecycle.job.job_id), T0 + timedelta(milliseconds=999)) == []
    events = lifecycle(tick(lifecycle.job.job_id), T0 + timedelta(seconds=1))
    assert kinds(events) == ["JobDispatched"]
    assert events[0].attempt_number == 2
    assert events[0].lease_id != first_dispatch(lifecycle).lease_id


def test_retry_that_would_cross_the_deadline_dead_letters_with_job_deadline_exceeded():
    lifecycle = accepted(deadline_at=T0 + timedelta(milliseconds=500))
    events = fail_once(lifecycle, T0, failure=failure())
    assert kinds(events) == ["AttemptRecorded", "JobDeadLettered"]
    assert lifecycle.job.failure.code == "JOB_DEADLINE_EXCEEDED"


def test_retry_exactly_at_the_deadline_is_not_scheduled():
    lifecycle = accepted(deadline_at=T0 + timedelta(seconds=1))
    fail_once(lifecycle, T0, failure=failure())
    assert lifecycle.job.status is JobStatus.DEAD_LETTER
    assert lifecycle.job.failure.code == "JOB_DEADLINE_EXCEEDED"


def test_retry_after_beyond_the_deadline_dead_letters():
    lifecycle = accepted(deadline_at=T0 + timedelta(seconds=10))
    fail_once(lifecycle, T0, failure=failure("HTTP_429", retry_at=T0 + timedelta(seconds=60)))
    assert lifecycle.job.failure.code == "JOB_DEADLINE_EXCEEDED"


def test_non_retryable_failure_dead_letters_after_one_attempt():
    lifecycle = accepted()
    events = fail_once(lifecycle, T0, failure=failure("HTTP_404", retryable=False))
    assert kinds(events) == ["AttemptRecorded", "JobDeadLettered"]
    assert lifecycle.job.failure.code == "HTTP_404"
    assert len(lifecycle.job.attempts) == 1


def test_exhausted_attempt_budget_dead_letters():
    lifecycle = accepted(attempt_limit=2)
    now = T0
    fail_once(lifecycle, now, failure=failure())
    now = lifecycle.job.next_attempt_at
    lifecycle(tick(lifecycle.job.job_id), now)
    events = fail_once(lifecycle, now, failure=failure())
    assert kinds(events) == ["AttemptRecorded", "JobDeadLettered"]
    assert lifecycle.job.failure.code == "HTTP_503"
    assert lifecycle.job.failure.disposition.value == "TERMINAL"


def test_local_capacity_denial_retries_and_costs_no_budget():
    lifecycle = accepted(attempt_limit=1)
    denied = attempt_under(lifecycle.job, AttemptOutcome.DENIED, failure=failure("BUDGET_EXHAUSTED"))
    events = lifecycle(report(lifecycle.job, denied))
    assert kinds(events) == ["AttemptRecorded", "RetryScheduled"]
    assert lifecycle.job.budget_spent == 0
    assert lifecycle.job.attempts == (denied,)


def test_work_a_stopping_worker_gives_back_is_dispatched_again_after_the_backoff_uncharged():
    lifecycle = accepted(attempt_limit=1)
    outcome, stopped = local_failure("WORKER_STOPPED")
    given_back = attempt_under(lifecycle.job, outcome, failure=stopped)
    assert kinds(lifecycle(report(lifecycle.job, given_back), T0)) == ["AttemptRecorded", "RetryScheduled"]
    assert lifecycle.job.budget_spent == 0
    assert lifecycle.job.next_attempt_at <= T0 + POLICY.backoff(1)  # not the start window's minute
    assert kinds(lifecycle(tick(lifecycle.job.job_id), lifecycle.job.next_attempt_at)) == ["JobDispatched"]


def test_a_job_denied_past_the_bound_dead_letters_with_the_last_denial_and_a_redrive_grants_a_new_bound():
    lifecycle = Lifecycle(policy=replace(POLICY, max_denials=3))
    lifecycle(submit(attempt_limit=1))
    now = T0
    for code in ("BUDGET_EXHAUSTED", "RATE_LIMITED", "BUDGET_EXHAUSTED"):
        denied = attempt_under(lifecycle.job, AttemptOutcome.DENIED, failure=failure(code))
        assert kinds(lifecycle(report(lifecycle.job, denied), now)) == ["AttemptRecorded", "RetryScheduled"]
        now = lifecycle.job.next_attempt_at
        lifecycle(tick(lifecycle.job.job_id), now)
    denied = attempt_under(lifecycle.job, AttemptOutcome.DENIED, failure=failure("RATE_LIMITED"))
    assert kinds(lifecycle(report(lifecycle.job, denied), now)) == ["AttemptRecorded", "JobDeadLettered"]
    assert lifecycle.job.failure.code == "RATE_LIMITED"
    assert lifecycle.job.failure.disposition.value == "TERMINAL"
    assert "denied 4 times" in lifecycle.job.failure.safe_message
    assert lifecycle.job.budget_spent == 0  # denials still cost no attempt
    by = {"actor_id": "ops", "actor_role": ActorRole.ADMIN, "reason": "fixed"}
    lifecycle(RedriveJob(command_id=uuid4(), job_id=lifecycle.job.job_id, **by), now)
    assert lifecycle.job.denials == 0


def test_other_policy_denial_is_terminal():
    lifecycle = accepted()
    denied = attempt_under(
        lifecycle.job, AttemptOutcome.DENIED, failure=failure("ROUTE_FORBIDDEN", retryable=False)
    )
    assert kinds(lifecycle(report(lifecycle.job, denied))) == ["AttemptRecorded", "JobDeadLettered"]


def test_failure_report_without_failure_detail_dead_letters_as_unknown():
    lifecycle = accepted()
    fail_once(lifecycle, T0)
    assert lifecycle.job.failure.code == "UNKNOWN_FAILURE"


def test_reaper_expires_a_lapsed_lease_and_retries():
    lifecycle = accepted()
    lifecycle(start(lifecycle.job))
    lease = lifecycle.job.lease
    assert lifecycle(tick(lifecycle.job.job_id), lease.lease_expires_at - timedelta(milliseconds=1)) == []
    events = lifecycle(tick(lifecycle.job.job_id), lease.lease_expires_at)
    assert kinds(events) == ["LeaseExpired", "RetryScheduled"]
    assert events[0].reason is ExpiryReason.EXPIRED
    assert lifecycle.job.budget_spent == 1


def test_reaper_expires_a_lease_beyond_the_horizon():
    lifecycle = accepted()
    # A lease pushed further than any registered type could ask for is corrupt.
    corrupt_at = T0 + timedelta(milliseconds=POLICY.lease_horizon_ms + 1)
    job = lifecycle.job
    lifecycle.state = replace(job, lease=Lease(1, job.lease.lease_id, corrupt_at))
    events = lifecycle(tick(job.job_id), T0)
    assert kinds(events) == ["LeaseExpired", "RetryScheduled"]
    assert events[0].reason is ExpiryReason.BEYOND_HORIZON


def test_lease_expiry_and_failed_reports_share_one_attempt_budget():
    lifecycle = accepted(attempt_limit=2)
    fail_once(lifecycle, T0, failure=failure())
    now = lifecycle.job.next_attempt_at
    lifecycle(tick(lifecycle.job.job_id), now)
    lifecycle(start(lifecycle.job), now)
    events = lifecycle(tick(lifecycle.job.job_id), lifecycle.job.lease.lease_expires_at)
    assert kinds(events) == ["LeaseExpired", "JobDeadLettered"]
    assert lifecycle.job.failure.code == "LEASE_EXPIRED"


def test_owner_may_cancel_and_the_cancellation_is_audited():
    lifecycle = accepted()
    cancel = CancelJob(
        job_id=lifecycle.job.job_id, actor_id="svc-a", actor_role=ActorRole.SERVICE, reason="no longer needed"
    )
    events = lifecycle(cancel)
    assert kinds(events) == ["JobCancelled", "AuditRecorded"]
    assert events[1].outcome is AuditOutcome.ALLOWED
    assert lifecycle.job.status is JobStatus.CANCELLED


def test_another_caller_may_not_cancel_and_the_refusal_is_audited():
    lifecycle = accepted()
    cancel = CancelJob(
        job_id=lifecycle.job.job_id, actor_id="svc-b", actor_role=ActorRole.SERVICE, reason="x"
    )
    events = lifecycle(cancel)
    assert kinds(events) == ["AuditRecorded"]
    assert events[0].outcome is AuditOutcome.DENIED
    assert events[0].actor_id == "svc-b"
    assert lifecycle.job.status is JobStatus.LEASED


@pytest.mark.parametrize(
    ("role", "allowed"), [(ActorRole.VIEWER, False), (ActorRole.OPERATOR, True), (ActorRole.ADMIN, True)]
)
def test_operator_may_cancel_only_with_a_role_that_permits_mutation(role, allowed):
    lifecycle = accepted()
    events = lifecycle(CancelJob(job_id=lifecycle.job.job_id, actor_id="op-1", actor_role=role, reason="ops"))
    assert (lifecycle.job.status is JobStatus.CANCELLED) is allowed
    assert events[-1].outcome is (AuditOutcome.ALLOWED if allowed else AuditOutcome.DENIED)


def test_cancel_of_a_finished_job_is_refused_and_audited():
    lifecycle = accepted()
    lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)))
    events = lifecycle(
        CancelJob(job_id=lifecycle.job.job_id, actor_id="svc-a", actor_role=ActorRole.SERVICE, reason="x")
    )
    assert kinds(events) == ["AuditRecorded"]
    assert events[0].detail == "job is already SUCCEEDED"


def test_terminal_job_ignores_timers_and_reports():
    lifecycle = accepted()
    lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)))
    done = lifecycle.job
    assert lifecycle(tick(done.job_id), T0 + timedelta(days=1)) == []
    late = attempt_under(_with_first_lease(lifecycle), AttemptOutcome.HTTP_ERROR)
    assert kinds(lifecycle(report(done, late))) == ["StaleReportIgnored"]
    assert lifecycle.job.status is JobStatus.SUCCEEDED
    assert lifecycle.job.attempts == done.attempts


def first_dispatch(lifecycle):
    return next(dispatched for event in lifecycle.events if (dispatched := dispatch_of(event)) is not None)


def _with_first_lease(lifecycle):
    """The job as the executor of attempt 1 saw it, holding that attempt's lease."""
    dispatched = first_dispatch(lifecycle)
    lease = Lease(dispatched.attempt_number, dispatched.lease_id, dispatched.lease_expires_at)
    return replace(lifecycle.job, lease=lease)


def test_now_is_truncated_to_milliseconds_so_events_survive_the_wire():
    lifecycle = Lifecycle()
    events = lifecycle(submit(), T0 + timedelta(microseconds=1999))
    assert events[0].occurred_at == T0 + timedelta(milliseconds=1)


def test_each_attempt_is_shown_with_its_stable_identity_the_job_and_its_number():
    lifecycle = Lifecycle()
    lifecycle(submit())
    job = lifecycle.job
    lifecycle(report(job, attempt_under(job, http_status=503, failure=failure("HTTP_503"))))
    retry_at = lifecycle.job.next_attempt_at
    assert retry_at is not None
    lifecycle(tick(job.job_id), retry_at)
    second = lifecycle.job
    lifecycle(report(second, attempt_under(second, http_status=200)))
    shown = job_view(lifecycle.job).attempts
    assert [(a.attempt_number, a.lease_id) for a in shown] == [
        (n, lease_id_for(job.job_id, n)) for n in (1, 2)
    ]


def test_a_job_logged_with_its_first_dispatch_apart_folds_and_hands_out_as_one_holding_it():
    """As every job was logged before its acceptance held its first lease."""
    lifecycle = Lifecycle()
    (accepted,) = lifecycle(submit())
    first = dispatch_of(accepted)
    assert first is not None
    plain = msgspec.structs.replace(accepted, first_lease_expires_at=None)
    older = [plain, msgspec.structs.replace(first, sequence=2)]
    folded = replay(older)
    bookkeeping = {"recent_command_ids": (), "recent_command_at": ()}
    assert updated(folded, accepted=accepted, sequence=1, **bookkeeping) == updated(
        lifecycle.state, **bookkeeping
    )
    (then,) = consequences_of(folded, older, lifecycle.policy, None).due
    (now,) = consequences_of(lifecycle.state, [accepted], lifecycle.policy, None).due
    assert then == now


@pytest.mark.parametrize("url", ["notaurl", "example.com/page", "  "])
def test_a_submission_that_is_no_url_is_told_so_not_about_its_scheme(url):
    events = Lifecycle()(submit(request=Request(url=url)))
    assert events[0].reason is RejectionReason.INVALID_URL
    assert "is not a URL" in events[0].detail
    assert "scheme" not in events[0].detail
