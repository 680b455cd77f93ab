"""Properties of decide/evolve over random command sequences for one job."""

from collections import Counter
from dataclasses import replace
from datetime import timedelta
from itertools import pairwise
from uuid import uuid4, uuid5

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.lifecycle.decide import MAX_STALE_TRACES, decide
from projections.lifecycle.evolve import replay
from projections.lifecycle.identity import event_ids
from projections.lifecycle.state import TERMINAL_STATUSES, Job, Lease, accepted_job
from projections.lifecycle.submission import submission_identity
from schemas.codec import decode, encode
from schemas.commands import CancelJob, DeleteJobHistory, RedriveJob, ReplayCallback, ReportCallback
from schemas.enums import ActorRole, AttemptOutcome, JobStatus
from schemas.events import (
    CallbackAbandoned,
    CallbackDelivered,
    CallbackReplayed,
    JobAccepted,
    JobCancelled,
    JobDeadLettered,
    JobHistoryDeleted,
    JobRedriven,
    JobSucceeded,
    RetryScheduled,
)
from schemas.records import Request
from tests.lifecycle import POLICY, T0, Lifecycle, attempt_under, failure, renew, report, start, submit, tick

TERMINAL_EVENTS = (JobSucceeded, JobDeadLettered, JobCancelled)
OUTCOMES = st.sampled_from(list(AttemptOutcome))
FAILURES = st.one_of(
    st.none(),
    st.builds(
        failure,
        code=st.sampled_from(["HTTP_503", "HTTP_429", "HTTP_404", "TIMEOUT", "BUDGET_EXHAUSTED"]),
        retryable=st.booleans(),
        retry_at=st.one_of(st.none(), st.integers(0, 7200).map(lambda s: T0 + timedelta(seconds=s))),
    ),
)


def lifecycle_view(job: Job) -> Job:
    """A job without its bookkeeping (sequence, recent command ids, stale reports traced)."""
    return replace(job, sequence=0, recent_command_ids=(), recent_command_at=(), stale_traces=())


def mutation_command(draw, job, choice):
    if choice == "cancel":
        role = draw(st.sampled_from(list(ActorRole)))
        actor = draw(st.sampled_from(["svc-a", "svc-b"]))
        return CancelJob(job_id=job.job_id, actor_id=actor, actor_role=role, reason="r", command_id=uuid4())
    if choice == "redrive":
        role = draw(st.sampled_from([ActorRole.ADMIN, ActorRole.ADMIN, ActorRole.OPERATOR]))
        new_deadline = draw(
            st.one_of(st.none(), st.integers(1, 3600).map(lambda s: T0 + timedelta(seconds=s)))
        )
        return RedriveJob(
            job_id=job.job_id,
            actor_id="ops",
            actor_role=role,
            reason="r",
            deadline_at=new_deadline,
            command_id=uuid4(),
        )
    if choice == "replay":
        role = draw(st.sampled_from(list(ActorRole)))
        url = draw(st.sampled_from([None, "https://standby.example/h"]))
        return ReplayCallback(
            job_id=job.job_id,
            actor_id="ops",
            actor_role=role,
            reason="r",
            callback_url=url,
            command_id=uuid4(),
        )
    role = draw(st.sampled_from([ActorRole.ADMIN, ActorRole.VIEWER]))
    return DeleteJobHistory(
        job_id=job.job_id, actor_id="ops", actor_role=role, reason="r", command_id=uuid4()
    )


def next_command(draw, lifecycle, first_submit, sent):
    job = accepted_job(lifecycle.state)
    choice = draw(
        st.sampled_from(
            [
                "submit",
                "report",
                "stale",
                "renew",
                "start",
                "tick",
                "cancel",
                "callback",
                "again",
                "redrive",
                "delete",
                "replay",
            ]
        )
    )
    if choice == "again" and sent:
        return draw(st.sampled_from(sent))  # a redelivery of any earlier command
    if job is None or choice == "submit":
        # The same command redelivered, or the same submission published again.
        return (
            first_submit if draw(st.booleans()) else msgspec.structs.replace(first_submit, command_id=uuid4())
        )
    if choice == "report" and job.lease is not None:
        attempt = attempt_under(job, draw(OUTCOMES), failure=draw(FAILURES))
        return report(job, attempt)
    if choice == "stale" or (choice in ("report", "renew", "start") and job.lease is None):
        other_lease = Lease(draw(st.integers(0, 5)), uuid4(), T0)
        return report(job, attempt_under(replace(job, lease=other_lease)))
    if choice == "renew":
        return renew(job)
    if choice == "start":
        return start(job)
    if choice in ("cancel", "redrive", "delete", "replay"):
        return mutation_command(draw, job, choice)
    if choice == "callback" and job.callbacks:
        pending = job.callbacks[0]
        return ReportCallback(
            command_id=uuid4(),
            job_id=job.job_id,
            webhook_id=pending.webhook_id,
            attempt_number=draw(st.sampled_from([pending.attempt_number, pending.attempt_number - 1])),
            delivered=draw(st.booleans()),
            retryable=draw(st.booleans()),
            delivery_attempts=1,
        )
    return tick(job.job_id)


def check_history(lifecycle):
    """Invariants of the whole log so far."""
    # Replaying the log through evolve rebuilds the same state.
    assert replay(lifecycle.events) == lifecycle.state
    # Each delivery ends at most once: the first, and each replay of it.
    ended = Counter(
        e.webhook_id for e in lifecycle.events if isinstance(e, CallbackDelivered | CallbackAbandoned)
    )
    replays = Counter(e.webhook_id for e in lifecycle.events if isinstance(e, CallbackReplayed))
    assert all(count <= 1 + replays[webhook_id] for webhook_id, count in ended.items())
    job = accepted_job(lifecycle.state)
    if job is None:
        return
    # Sequences are contiguous and event ids unique per job.
    job_events = [e for e in lifecycle.events if e.job_id == job.job_id]
    assert [e.sequence for e in job_events] == list(range(1, len(job_events) + 1))
    assert len({e.event_id for e in job_events}) == len(job_events)
    # One JobAccepted per life of the job id (a deleted history may be submitted again), and
    # one terminal event per run (a redrive starts another).
    deletions = sum(isinstance(e, JobHistoryDeleted) for e in job_events)
    assert sum(isinstance(e, JobAccepted) for e in job_events) == 1 + deletions
    redrives = sum(isinstance(e, JobRedriven) for e in job_events)
    assert sum(isinstance(e, TERMINAL_EVENTS) for e in job_events) <= 1 + redrives + deletions
    # A redrive only follows a dead letter; a deletion only a finished job.
    for earlier, event in pairwise(job_events):
        if isinstance(event, JobRedriven | JobHistoryDeleted):
            assert not isinstance(earlier, JobAccepted)
    # Attempts never exceed the budget granted last.
    assert job.budget_spent <= job.accepted.attempt_limit
    if job.status is JobStatus.LEASED:
        assert job.lease is not None
    # One try at a time per delivery.
    assert all((p.dispatched_at is None) != (p.next_attempt_at is None) for p in job.callbacks)


def check_step(before, after, events, now, deadline):
    """Invariants of one decision."""
    # A stale report never changes state, and is traced at most once, a few in all.
    if [type(e).__name__ for e in events] in (["StaleReportIgnored"], []) and after is not None:
        assert lifecycle_view(after) == lifecycle_view(before)
    if isinstance(after, Job):
        assert len(after.stale_traces) == len(set(after.stale_traces)) <= MAX_STALE_TRACES
    for event in events:
        if isinstance(event, RetryScheduled):
            # Never before Retry-After, never at or past the deadline.
            if event.failure.retry_at is not None:
                assert event.next_attempt_at >= event.failure.retry_at
            assert event.next_attempt_at < deadline
            assert event.next_attempt_at >= now


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_random_command_sequences_keep_every_lifecycle_invariant(data):
    draw = data.draw
    deadline = T0 + timedelta(seconds=draw(st.integers(1, 600)))
    first_submit = submit(
        deadline_at=deadline,
        callback_url="https://hooks.example/x",
        attempt_limit=draw(st.one_of(st.none(), st.integers(1, 3))),
        request=Request(url="https://example.com/p"),
    )
    lifecycle = Lifecycle()
    now = T0
    terminal_seen = None
    sent = []
    for _ in range(draw(st.integers(1, 25))):
        now += timedelta(milliseconds=draw(st.integers(0, 120_000)))
        command = next_command(draw, lifecycle, first_submit, sent)
        before = accepted_job(lifecycle.state)
        # A decision depends only on state, command and the command's time.
        assert decide(lifecycle.state, command, now, POLICY) == decide(lifecycle.state, command, now, POLICY)
        events = lifecycle(command, now)
        after = accepted_job(lifecycle.state)
        # The core builds events without validating them: each must survive the wire unchanged.
        for event in events:
            assert decode(encode(event)) == event
        if events:
            sent.append(command)
            # Once applied, the same command decides nothing again.
            assert decide(lifecycle.state, command, now, POLICY) == []
        check_history(lifecycle)
        # A redrive may have moved the deadline: the job's own is the bound.
        check_step(before, after, events, now, deadline if before is None else before.accepted.deadline_at)
        # Terminal states absorb everything but an admin's redrive or history delete.
        if any(isinstance(e, JobRedriven | JobHistoryDeleted) for e in events):
            terminal_seen = None
            assert after is None or after.status in (JobStatus.LEASED, JobStatus.PENDING)
        elif terminal_seen is not None:
            assert lifecycle_view(after).status is terminal_seen.status
            assert after.attempts == terminal_seen.attempts
            assert after.failure == terminal_seen.failure
            assert after.artifacts == terminal_seen.artifacts
        elif after is not None and after.status in TERMINAL_STATUSES:
            terminal_seen = after


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 6))
def test_a_duplicate_submission_never_yields_a_second_job_accepted(repeats):
    lifecycle = Lifecycle()
    for index in range(repeats):
        lifecycle(submit(command_id=uuid4()), T0 + timedelta(seconds=index))
    assert sum(isinstance(e, JobAccepted) for e in lifecycle.events) == 1
    assert lifecycle.job.reuse_count == repeats - 1


@settings(max_examples=200)
@given(st.uuids(), st.uuids(), st.integers(0, 10_000))
def test_event_ids_are_the_uuid5_of_the_command_job_and_index(command_id, job_id, index):
    assert event_ids(command_id, job_id)(index) == uuid5(command_id, f"{job_id}:{index}")


@settings(max_examples=100)
@given(st.text(min_size=1, max_size=20), st.one_of(st.none(), st.text(min_size=1, max_size=20)))
def test_a_remembered_submission_identity_is_the_identity_of_an_equal_fresh_command(path, key):
    command = submit(request=Request(url=f"https://example.com/{path.encode().hex()}"), idempotency_key=key)
    first = submission_identity(command)
    assert submission_identity(command) == first
    assert submission_identity(msgspec.structs.replace(command)) == first
    changed = msgspec.structs.replace(command, caller_identity=command.caller_identity + "-other")
    assert submission_identity(changed)[0] != first[0]
