"""Every command on the submit topic has exactly one answer, and it says what deciding it did."""

from __future__ import annotations

from uuid import uuid4

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from projections.lifecycle.answers import decision_of
from projections.lifecycle.decide import decide
from projections.lifecycle.emit import command_id_of
from projections.lifecycle.evolve import replay
from projections.lifecycle.mutations import refusal_of
from projections.lifecycle.submission import submission_identity
from schemas.commands import CancelJob, SubmitJob
from schemas.enums import ActorRole, AnswerKind, JobStatus, RejectionReason
from schemas.records import Request
from tests.lifecycle import POLICY, T0, Lifecycle, submit

URLS = st.sampled_from(["https://example.com/a", "https://example.com/b", "ftp://example.com/c", "not a url"])
KEYS = st.sampled_from([None, "k1", "k2"])


def answered(state, command):
    job_id = submission_identity(command)[0] if isinstance(command, SubmitJob) else command.job_id
    refused = refusal_of(state, command, T0)
    events = [] if refused is not None else decide(state, command, T0, POLICY)
    return decision_of(job_id, command, state, replay(events, state), events, refused), events


@given(st.lists(st.tuples(URLS, KEYS, st.booleans()), min_size=1, max_size=8))
def test_each_submission_is_answered_by_what_deciding_it_did(sequence):
    states: dict = {}  # by job id, as the lifecycle agent keeps them
    sent: list[SubmitJob] = []
    for url, key, resend in sequence:
        command = sent[-1] if resend and sent else submit(request=Request(url=url), idempotency_key=key)
        job_id = submission_identity(command)[0]
        decided, events = answered(states.get(job_id), command)
        states[job_id] = replay(events, states.get(job_id))
        sent.append(command)
        names = {type(event).__name__ for event in events if event.command_id == command_id_of(command)}
        assert decided.job_id == job_id
        if "JobAccepted" in names:
            assert decided.answer is AnswerKind.CREATED
            assert decided.job_status in {JobStatus.PENDING, JobStatus.LEASED}
        elif "SubmissionReused" in names:
            assert decided.answer is AnswerKind.REUSED
        elif "JobRejected" in names:
            assert decided.answer is AnswerKind.REJECTED
            assert decided.rejection is not None
            assert decided.reason
        else:
            assert not events
            assert decided.answer is AnswerKind.REPEATED


def test_a_reuse_of_an_ended_job_answers_with_its_outcome():
    lifecycle = Lifecycle()
    first = submit(idempotency_key="k")
    lifecycle(first)
    cancel = CancelJob(
        job_id=lifecycle.job.job_id,
        command_id=uuid4(),
        actor_id="svc-a",
        actor_role=ActorRole.SERVICE,
        reason="x",
    )
    lifecycle(cancel)
    decided, _ = answered(lifecycle.state, msgspec.structs.replace(first, command_id=uuid4()))
    assert (decided.answer, decided.job_status) == (AnswerKind.REUSED, JobStatus.CANCELLED)


def test_a_key_reused_for_another_request_is_rejected_naming_the_job_it_names():
    lifecycle = Lifecycle()
    lifecycle(submit(idempotency_key="k"))
    other = submit(idempotency_key="k", request=Request(url="https://example.com/other"))
    decided, _ = answered(lifecycle.state, other)
    assert decided.answer is AnswerKind.REJECTED
    assert decided.rejection is RejectionReason.IDEMPOTENCY_KEY_REUSED
    assert decided.job_id == lifecycle.job.job_id


def test_mutations_are_applied_refused_or_repeated():
    lifecycle = Lifecycle()
    lifecycle(submit())
    job_id = lifecycle.job.job_id
    cancel = CancelJob(
        job_id=job_id, command_id=uuid4(), actor_id="svc-a", actor_role=ActorRole.SERVICE, reason="x"
    )
    applied, _ = answered(lifecycle.state, cancel)
    assert (applied.answer, applied.job_status) == (AnswerKind.APPLIED, JobStatus.CANCELLED)
    lifecycle(cancel)
    repeated, _ = answered(lifecycle.state, cancel)
    assert repeated.answer is AnswerKind.REPEATED
    again = msgspec.structs.replace(cancel, command_id=uuid4())
    refused, _ = answered(lifecycle.state, again)
    assert refused.answer is AnswerKind.REFUSED
    assert refused.reason
    unknown = msgspec.structs.replace(cancel, job_id=uuid4(), command_id=uuid4())
    assert answered(None, unknown)[0].answer is AnswerKind.REFUSED
