"""Redrive, history delete, audited reads and who may create a job: the rules in decide."""

from datetime import timedelta
from uuid import uuid4

import pytest

from projections.lifecycle.audit import audit_id_of, audit_of
from projections.lifecycle.consequences import consequences_of
from projections.lifecycle.mutations import offered_mutations, refusal_of
from projections.lifecycle.state import Unaccepted
from schemas.commands import CancelJob, DeleteJobHistory, RedriveJob
from schemas.enums import (
    ActorRole,
    AttemptOutcome,
    AuditAction,
    AuditOutcome,
    CacheMode,
    JobStatus,
    RejectionReason,
)
from schemas.events import AuditRecorded, JobAccepted, JobRejected
from tests.lifecycle import (
    POLICY,
    T0,
    Lifecycle,
    attempt_under,
    audit_command,
    failure,
    kinds,
    report,
    submit,
    tick,
)


def dead_lettered(attempt_limit: int = 1, **overrides) -> Lifecycle:
    lifecycle = Lifecycle()
    lifecycle(submit(attempt_limit=attempt_limit, **overrides))
    for _ in range(attempt_limit):
        job = lifecycle.job
        attempt = attempt_under(job, AttemptOutcome.HTTP_ERROR, failure=failure(retryable=True))
        lifecycle(report(job, attempt))
        if lifecycle.job.status is JobStatus.RETRY_WAIT:
            lifecycle(tick(job.job_id), lifecycle.job.next_attempt_at)
    assert lifecycle.job.status is JobStatus.DEAD_LETTER
    return lifecycle


def redrive(lifecycle: Lifecycle, role: ActorRole = ActorRole.ADMIN, **overrides) -> RedriveJob:
    fields = {"job_id": lifecycle.job.job_id, "actor_id": "ops", "actor_role": role, "reason": "origin fixed"}
    return RedriveJob(command_id=uuid4(), **(fields | overrides))


def delete(job_id, role: ActorRole = ActorRole.ADMIN) -> DeleteJobHistory:
    return DeleteJobHistory(command_id=uuid4(), job_id=job_id, actor_id="ops", actor_role=role, reason="gdpr")


def test_an_admin_redrive_runs_a_dead_letter_again_with_a_fresh_budget_and_keeps_its_history():
    lifecycle = dead_lettered(attempt_limit=2)
    attempts_before = lifecycle.job.attempts
    events = lifecycle(redrive(lifecycle))
    assert kinds(events) == ["JobRedriven", "JobDispatched", "AuditRecorded"]
    assert events[-1].outcome is AuditOutcome.ALLOWED
    assert events[-1].action is AuditAction.JOB_REDRIVE
    job = lifecycle.job
    assert job.status is JobStatus.LEASED
    assert job.attempts == attempts_before
    assert job.lease.attempt_number == 3
    assert job.budget_spent == 0
    # The fresh budget is the job's own: two more attempts before it dead-letters again.
    lifecycle(report(job, attempt_under(job, AttemptOutcome.HTTP_ERROR, failure=failure())))
    assert lifecycle.job.status is JobStatus.RETRY_WAIT


def test_the_redriven_job_completes_once_the_origin_answers():
    lifecycle = dead_lettered()
    lifecycle(redrive(lifecycle))
    events = lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)))
    assert kinds(events) == ["JobSucceeded"]
    assert lifecycle.job.status is JobStatus.SUCCEEDED


@pytest.mark.parametrize("role", [ActorRole.SERVICE, ActorRole.VIEWER, ActorRole.OPERATOR])
def test_only_an_admin_may_redrive(role):
    lifecycle = dead_lettered()
    events = lifecycle(redrive(lifecycle, role, actor_id="svc-a"))
    assert kinds(events) == ["AuditRecorded"]
    assert events[0].outcome is AuditOutcome.DENIED
    assert "ADMIN may" in events[0].detail
    assert lifecycle.job.status is JobStatus.DEAD_LETTER


def test_a_job_that_is_not_dead_lettered_is_not_redriven():
    lifecycle = Lifecycle()
    lifecycle(submit())
    events = lifecycle(redrive(lifecycle))
    assert kinds(events) == ["AuditRecorded"]
    assert events[0].detail == "job is LEASED, not DEAD_LETTER"


def test_a_redrive_past_the_deadline_needs_a_new_one():
    lifecycle = dead_lettered(deadline_at=T0 + timedelta(minutes=5))
    late = T0 + timedelta(minutes=10)
    refused = lifecycle(redrive(lifecycle), late)
    assert refused[-1].detail == "the job's deadline has passed: give a new deadline"
    events = lifecycle(redrive(lifecycle, deadline_at=late + timedelta(hours=1)), late)
    assert kinds(events) == ["JobRedriven", "JobDispatched", "AuditRecorded"]
    assert lifecycle.job.accepted.deadline_at == late + timedelta(hours=1)


def test_history_of_a_job_that_can_still_run_is_never_deleted():
    lifecycle = Lifecycle()
    lifecycle(submit())
    events = lifecycle(delete(lifecycle.job.job_id))
    assert kinds(events) == ["AuditRecorded"]
    assert events[0].outcome is AuditOutcome.DENIED
    assert events[0].detail == "job is LEASED and can still run"
    assert lifecycle.job.status is JobStatus.LEASED


def test_a_job_whose_callback_is_still_owed_keeps_its_history():
    lifecycle = Lifecycle()
    lifecycle(submit(callback_url="https://hooks.example/done"))
    lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)))
    events = lifecycle(delete(lifecycle.job.job_id))
    assert events[0].detail == "its callback is still being delivered"


def test_an_admin_deletes_a_finished_job_and_the_same_submission_may_create_it_again():
    lifecycle = Lifecycle()
    command = submit(idempotency_key="k")
    lifecycle(command)
    job_id = lifecycle.job.job_id
    lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)))
    events = lifecycle(delete(job_id))
    assert kinds(events) == ["JobHistoryDeleted", "AuditRecorded"]
    assert isinstance(lifecycle.state, Unaccepted)
    again = lifecycle(submit(idempotency_key="k"), T0 + timedelta(seconds=1))
    assert isinstance(again[0], JobAccepted)
    assert again[0].job_id == job_id
    assert again[0].sequence == events[-1].sequence + 1


def test_a_viewer_may_not_delete_history():
    lifecycle = Lifecycle()
    lifecycle(submit())
    lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)))
    events = lifecycle(delete(lifecycle.job.job_id, ActorRole.VIEWER))
    assert events[0].detail == "role VIEWER may not delete history; ADMIN may"


def test_a_service_creating_its_own_job_is_audited_by_the_acceptance():
    lifecycle = Lifecycle()
    events = lifecycle(submit(submitted_by="svc-a", submitter_role=ActorRole.SERVICE))
    assert not [event for event in events if isinstance(event, AuditRecorded)]
    audit = audit_of(events[0])
    assert audit is not None
    assert (audit.action, audit.outcome, audit.actor_id, audit.actor_role, audit.target) == (
        AuditAction.JOB_CREATE,
        AuditOutcome.ALLOWED,
        "svc-a",
        ActorRole.SERVICE,
        f"job:{events[0].job_id}",
    )
    assert audit.audit_id == audit_id_of(events[0].command_id)  # the id every audit record of a command has


def test_a_creation_on_another_callers_behalf_writes_its_own_audit_record_naming_the_submitter():
    lifecycle = Lifecycle()
    events = lifecycle(submit(caller_identity="svc-a", submitted_by="ops", submitter_role=ActorRole.OPERATOR))
    assert kinds(events) == ["JobAccepted", "AuditRecorded"]
    audit = audit_of(events[1])
    assert audit is not None
    derived = audit_of(events[0])
    assert (audit.action, audit.actor_id, audit.actor_role) == (
        AuditAction.JOB_CREATE,
        "ops",
        ActorRole.OPERATOR,
    )
    assert derived is not None
    assert (audit.audit_id, audit.occurred_at) == (
        derived.audit_id,
        derived.occurred_at,
    )  # it takes its place


def test_a_service_may_not_submit_as_another_caller_and_the_refusal_is_audited():
    lifecycle = Lifecycle()
    events = lifecycle(
        submit(caller_identity="svc-b", submitted_by="svc-a", submitter_role=ActorRole.SERVICE)
    )
    assert kinds(events) == ["JobRejected", "AuditRecorded"]
    rejected = events[0]
    assert isinstance(rejected, JobRejected)
    assert rejected.reason is RejectionReason.NOT_PERMITTED
    assert events[1].outcome is AuditOutcome.DENIED


@pytest.mark.parametrize(("role", "allowed"), [(ActorRole.VIEWER, False), (ActorRole.OPERATOR, True)])
def test_who_may_submit_for_another_caller(role, allowed):
    lifecycle = Lifecycle()
    events = lifecycle(submit(caller_identity="svc-b", submitted_by="someone", submitter_role=role))
    assert isinstance(events[0], JobAccepted) is allowed


def test_an_audited_read_is_recorded_as_given():
    lifecycle = Lifecycle()
    lifecycle(submit())
    said = "a service may read only its own jobs"
    command = audit_command(
        lifecycle.job.job_id, outcome=AuditOutcome.DENIED, detail=said, request_id="req-1"
    )
    events = lifecycle(command)
    assert kinds(events) == ["AuditRecorded"]
    assert (events[0].actor_id, events[0].action, events[0].request_id) == (
        "svc-b",
        AuditAction.JOB_READ,
        "req-1",
    )
    assert lifecycle(command) == []


def test_a_redrive_asks_the_origin_again_unless_told_to_use_the_cache():
    lifecycle = dead_lettered()
    events = lifecycle(redrive(lifecycle))
    dispatched = consequences_of(lifecycle.state, events, POLICY).due
    assert [work.cache_mode for work in dispatched] == [CacheMode.BYPASS]
    assert lifecycle.job.accepted.cache_mode is CacheMode.REUSE_VALID  # its identity is unchanged
    again = dead_lettered()
    events = again(redrive(again, cache_mode=CacheMode.REUSE_VALID))
    assert [w.cache_mode for w in consequences_of(again.state, events, POLICY).due] == [CacheMode.REUSE_VALID]


@pytest.mark.parametrize("role", list(ActorRole))
def test_what_a_console_offers_is_what_the_lifecycle_allows(role):
    leased = Lifecycle()
    leased(submit())
    for lifecycle in (dead_lettered(), leased):
        job = lifecycle.job
        now = job.completed_at or job.accepted.occurred_at
        cancel = CancelJob(
            command_id=uuid4(),
            job_id=job.job_id,
            actor_id=job.accepted.caller_identity,
            actor_role=role,
            reason="not needed",
        )
        commands = {
            AuditAction.JOB_CANCEL: cancel,
            AuditAction.JOB_REDRIVE: redrive(lifecycle, role),
            AuditAction.JOB_HISTORY_DELETE: delete(job.job_id, role),
        }
        offered = offered_mutations(role, job.status)
        for action, command in commands.items():
            assert (action in offered) == (refusal_of(job, command, now) is None), (job.status, action)
