"""What another principal can do to a job it may not touch: nothing the job keeps (issue 16)."""

from datetime import timedelta
from uuid import UUID, uuid4

import msgspec
import pytest

from projections.lifecycle.decide import decide
from projections.lifecycle.evolve import evolve
from projections.lifecycle.identity import audit_stream_id, job_id_for, name_based, public_command_id
from projections.lifecycle.mutations import MAX_AUDIT_RECORDS, refusal_of
from projections.lifecycle.state import COMMANDS_REMEMBERED_FOR, RECENT_COMMANDS_KEPT, Unaccepted
from projections.lifecycle.submission import submission_identity
from schemas.commands import CancelJob
from schemas.enums import ActorRole, AttemptOutcome, AuditAction, AuditOutcome, JobStatus
from schemas.events import JobRejected
from tests.lifecycle import POLICY, T0, Lifecycle, attempt_under, audit_command, kinds, renew, report, submit


def cancel_by(job_id: UUID, actor: str, role: ActorRole = ActorRole.SERVICE, **fields: object) -> CancelJob:
    values = {"command_id": uuid4(), "job_id": job_id, "actor_id": actor, "actor_role": role, "reason": "r"}
    return CancelJob(**(values | fields))


def test_a_submission_as_another_caller_never_touches_that_callers_job():
    lifecycle = Lifecycle()
    lifecycle(submit(submitted_by="svc-a", submitter_role=ActorRole.SERVICE, idempotency_key="k"))
    victim = lifecycle.job
    forged = submit(caller_identity="svc-a", submitted_by="svc-b", submitter_role=ActorRole.SERVICE)
    forged = msgspec.structs.replace(forged, idempotency_key="k")
    refused_stream, _ = submission_identity(forged)
    assert refused_stream != victim.job_id
    events = decide(None, forged, T0, POLICY)
    assert kinds(events) == ["JobRejected", "AuditRecorded"]
    assert all(event.job_id == refused_stream for event in events)
    assert isinstance(events[0], JobRejected)
    assert events[0].reason == "NOT_PERMITTED"


def test_refused_commands_of_another_principal_leave_the_job_and_its_dedupe_window_alone():
    lifecycle = Lifecycle()
    lifecycle(submit())
    job = lifecycle.job
    report_id = name_based(job.lease.lease_id, "report")  # what an attacker can compute
    for _ in range(3 * RECENT_COMMANDS_KEPT):
        lifecycle(cancel_by(job.job_id, "svc-b", command_id=report_id))
        lifecycle(cancel_by(job.job_id, "svc-b"))
    assert lifecycle.job.sequence == job.sequence
    assert lifecycle.job.recent_command_ids == job.recent_command_ids
    succeeded = lifecycle(msgspec.structs.replace(report(job, attempt_under(job)), command_id=report_id))
    assert kinds(succeeded) == ["JobSucceeded"]


def test_a_refusal_goes_to_the_actors_audit_stream_answered_as_no_such_job():
    lifecycle = Lifecycle()
    lifecycle(submit())
    refused = refusal_of(lifecycle.state, cancel_by(lifecycle.job.job_id, "svc-b"), T0)
    assert refused is not None
    assert refused.job_id == audit_stream_id("svc-b", T0)
    assert (refused.outcome, refused.refusal, refused.detail) == (
        AuditOutcome.DENIED,
        "not_found",
        "no such job",
    )
    assert refused.target == f"job:{lifecycle.job.job_id}"


def test_a_principals_audit_stream_keeps_a_bounded_number_of_records_an_hour():
    stream = audit_stream_id("svc-b", T0)
    state = None
    recorded = 0
    for _ in range(MAX_AUDIT_RECORDS + 50):
        command = audit_command(stream, AuditAction.JOB_CANCEL, AuditOutcome.DENIED, detail="x" * 1_000)
        for event in decide(state, command, T0, POLICY):
            state = evolve(state, event)
            recorded += 1
    assert recorded == MAX_AUDIT_RECORDS + 1
    assert isinstance(state, Unaccepted)
    assert "counted, not recorded" in lifecycle_last_detail(state, stream)
    assert audit_stream_id("svc-b", T0 + timedelta(hours=1)) != stream


def lifecycle_last_detail(state: Unaccepted, stream: UUID) -> str:
    command = audit_command(stream, outcome=AuditOutcome.DENIED, detail="more")
    assert decide(state, command, T0, POLICY) == []
    before = Unaccepted(job_id=stream, sequence=0, audit_records=MAX_AUDIT_RECORDS)
    (note,) = decide(before, command, T0, POLICY)
    return str(getattr(note, "detail", ""))


def test_a_command_id_is_remembered_as_long_as_a_command_may_be_valid_however_many_came_since():
    lifecycle = Lifecycle()
    first = submit()
    lifecycle(first)
    for second in range(2 * RECENT_COMMANDS_KEPT):
        lifecycle(renew(lifecycle.job), T0 + timedelta(seconds=second))
    assert lifecycle(first, T0 + COMMANDS_REMEMBERED_FOR - timedelta(seconds=1)) == []
    later = T0 + COMMANDS_REMEMBERED_FOR + timedelta(minutes=1)
    for second in range(2 * RECENT_COMMANDS_KEPT):
        lifecycle(renew(lifecycle.job), later + timedelta(seconds=second))
    assert first.command_id not in lifecycle.job.recent_command_ids


def test_an_expired_command_decides_nothing():
    lifecycle = Lifecycle()
    assert lifecycle(submit(expires_at=T0 - timedelta(seconds=1))) == []
    lifecycle(submit())
    refused = lifecycle(cancel_by(lifecycle.job.job_id, "svc-a", expires_at=T0 - timedelta(seconds=1)))
    assert "expired" in refused[0].detail
    assert lifecycle.job.status is JobStatus.LEASED


@pytest.mark.parametrize("principal", ["", "svc-a", "svc-b"])
def test_public_command_ids_live_in_their_senders_namespace(principal):
    command_id = uuid4()
    mine = public_command_id(principal, command_id)
    assert mine not in {command_id, public_command_id(principal + "x", command_id)}
    assert job_id_for("svc-a", "k") != public_command_id(principal, job_id_for("svc-a", "k"))


def test_an_owner_still_decides_its_own_job_after_others_were_refused():
    lifecycle = Lifecycle()
    lifecycle(submit())
    job = lifecycle.job
    lifecycle(cancel_by(job.job_id, "svc-b", ActorRole.VIEWER))
    lifecycle(report(job, attempt_under(job, AttemptOutcome.FETCHED)))
    assert lifecycle.job.status is JobStatus.SUCCEEDED
