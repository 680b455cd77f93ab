"""A monitor's rules in decide and evolve: its checks as jobs, one per due time, and the changes found."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.lifecycle.completion import completion_of
from projections.lifecycle.consequences import consequences_of, next_due_at
from projections.lifecycle.evolve import replay
from projections.lifecycle.identity import job_id_for
from projections.lifecycle.monitor_work import check_result
from projections.lifecycle.monitors import check_key, checked_monitor, monitor_id_for
from projections.lifecycle.state import Job, Monitor, updated
from projections.monitors.content import MAX_DIFF_CHARS
from schemas.commands import (
    CreateMonitor,
    DeleteMonitor,
    EditMonitor,
    PauseMonitor,
    RecordCheck,
    ReplayCallback,
    ReportCallback,
    ReportCheckReading,
    ResumeMonitor,
)
from schemas.enums import (
    ActorRole,
    AttemptOutcome,
    AuditAction,
    AuditOutcome,
    CacheMode,
    CaptureMode,
    ChangeKind,
    JobStatus,
)
from schemas.events import AuditRecorded, ChangeDetected, CheckRecorded, CheckScheduled, Event, JobCompleted
from schemas.records import Artifact, MonitorSchedule, MonitorSpec, MonitorWindow, Request
from tests.lifecycle import POLICY, T0, Lifecycle, kinds, submit, tick

MINUTE = timedelta(minutes=1)
SPEC = MonitorSpec(request=Request(url="https://example.com/pricing"), schedule=MonitorSchedule(every_s=60))
MONITOR_ID = monitor_id_for("svc-a", "pricing")
ACTOR: dict[str, Any] = {"actor_id": "svc-a", "actor_role": ActorRole.SERVICE}


def _content(letter: str) -> Artifact:
    return Artifact(
        artifact_id=UUID(int=ord(letter)),
        key=f"sha256/{letter}",
        content_type="text/html",
        size_bytes=10,
        sha256=letter * 64,
    )


def create(spec: MonitorSpec = SPEC, name: str = "pricing") -> CreateMonitor:
    return CreateMonitor(command_id=uuid4(), caller_identity="svc-a", name=name, spec=spec)


def act(command: type[Any], **fields: Any) -> Any:
    return command(monitor_id=MONITOR_ID, command_id=uuid4(), **ACTOR, **fields)


def denied(events: list[Event]) -> str:
    """The refusal kind of the one audit record a refused command leaves (in its actor's stream)."""
    (record,) = events
    assert isinstance(record, AuditRecorded)
    assert record.outcome is AuditOutcome.DENIED
    assert record.action.name.startswith("MONITOR_")
    return record.refusal


def monitor(life: Lifecycle) -> Monitor:
    assert isinstance(life.state, Monitor)
    return life.state


def ended(life: Lifecycle, status: JobStatus = JobStatus.SUCCEEDED, **fields: Any) -> RecordCheck:
    pending = monitor(life).pending
    assert pending is not None
    return RecordCheck(
        monitor_id=MONITOR_ID, command_id=uuid4(), check_job_id=pending.check_job_id, status=status, **fields
    )


def fetched(life: Lifecycle, content: Artifact, http_status: int = 200) -> RecordCheck:
    return ended(life, outcome=AttemptOutcome.FETCHED, http_status=http_status, artifacts=(content,))


def reading(life: Lifecycle, fingerprint: str | None, **fields: Any) -> ReportCheckReading:
    pending = monitor(life).pending
    assert pending is not None
    return ReportCheckReading(
        monitor_id=MONITOR_ID,
        command_id=uuid4(),
        check_job_id=pending.check_job_id,
        fingerprint=fingerprint,
        **fields,
    )


def callback_report(webhook_id: str, attempt_number: int, http_status: int) -> ReportCallback:
    """The outbox's report of one try at a monitor's callback: delivered on a 2xx, else to retry."""
    delivered = 200 <= http_status < 300
    return ReportCallback(
        command_id=uuid4(),
        job_id=MONITOR_ID,
        webhook_id=webhook_id,
        attempt_number=attempt_number,
        delivered=delivered,
        retryable=not delivered,
        delivery_attempts=attempt_number,
        http_status=http_status,
        last_error="" if delivered else f"HTTP {http_status}",
    )


def check(life: Lifecycle, content: Artifact, fingerprint: str, at: Any) -> list[Event]:
    """One whole check at `at`: scheduled, fetched, read; the events of its fetch and its reading."""
    assert kinds(life(tick(MONITOR_ID), at)) == ["CheckScheduled"]
    return life(fetched(life, content), at) + life(reading(life, fingerprint, diff="-a\n+b\n"), at)


def test_a_new_monitor_checks_at_once_for_a_baseline_then_on_its_schedule():
    life = Lifecycle()
    created, audited = life(create())
    assert created.job_id == MONITOR_ID
    assert (audited.action, audited.outcome, audited.target) == (  # type: ignore[union-attr]
        AuditAction.MONITOR_CREATE,
        AuditOutcome.ALLOWED,
        f"monitor:{MONITOR_ID}",
    )
    assert next_due_at(life.state, POLICY) == T0
    (scheduled,) = life(tick(MONITOR_ID), T0)
    assert isinstance(scheduled, CheckScheduled)
    assert scheduled.check_job_id == job_id_for("svc-a", check_key(MONITOR_ID, T0))
    assert next_due_at(life.state, POLICY) is None  # one check at a time
    (submission,) = consequences_of(life.state, [scheduled], POLICY).commands
    assert submission.caller_identity == "svc-a"
    assert submission.cache_mode is CacheMode.REVALIDATE
    assert submission.request == SPEC.request
    assert job_id_for(submission.caller_identity, submission.idempotency_key or "") == scheduled.check_job_id
    assert checked_monitor(submission.idempotency_key or "") == MONITOR_ID

    assert kinds(life(fetched(life, _content("a")), T0)) == ["CheckFetched"]
    (read,) = consequences_of(life.state, life.events[-1:], POLICY).reads
    assert (read.artifact, read.previous) == (_content("a"), None)
    events = life(reading(life, "f1", diff="+Only 12 EUR\n", lines_added=1), T0)
    assert kinds(events) == ["CheckRecorded", "ChangeDetected"]
    recorded, change = events
    assert isinstance(recorded, CheckRecorded)
    assert isinstance(change, ChangeDetected)
    assert (recorded.change, change.kind) == (ChangeKind.NEW, ChangeKind.NEW)
    assert recorded.next_due_at == next_due_at(life.state, POLICY)
    assert recorded.next_due_at is not None
    assert T0 < recorded.next_due_at <= T0 + MINUTE
    (published,) = consequences_of(life.state, [change], POLICY).changes
    assert (published.monitor_id, published.kind, published.diff) == (MONITOR_ID, ChangeKind.NEW, change.diff)
    assert published.url == SPEC.request.url


def test_only_a_change_is_a_change_and_a_304_or_the_same_stored_bytes_need_no_reading():
    life = Lifecycle()
    life(create())
    check(life, _content("a"), "f1", T0)
    assert life(tick(MONITOR_ID), T0 + MINUTE / 2) == []  # not due yet
    at = T0 + MINUTE * 2
    life(tick(MONITOR_ID), at)
    assert kinds(life(ended(life, outcome=AttemptOutcome.NOT_MODIFIED, artifacts=(_content("a"),)), at)) == [
        "CheckRecorded"
    ]
    at += MINUTE
    life(tick(MONITOR_ID), at)
    assert kinds(life(fetched(life, _content("a")), at)) == ["CheckRecorded"]  # same stored bytes
    at += MINUTE
    events = check(life, _content("b"), "f1", at)  # other bytes, same visible text
    assert kinds(events) == ["CheckFetched", "CheckRecorded"]
    at += MINUTE
    assert kinds(check(life, _content("c"), "f2", at)) == ["CheckFetched", "CheckRecorded", "ChangeDetected"]
    assert monitor(life).changes == 2
    assert monitor(life).checks == 5


def test_a_page_going_away_is_removed_and_coming_back_is_restored():
    life = Lifecycle()
    life(create())
    check(life, _content("a"), "f1", T0)
    at = T0 + MINUTE * 2
    life(tick(MONITOR_ID), at)
    gone = life(ended(life, JobStatus.DEAD_LETTER, http_status=404, failure_code="HTTP_404"), at)
    assert kinds(gone) == ["CheckRecorded", "ChangeDetected"]
    assert isinstance(gone[1], ChangeDetected)
    assert (gone[1].kind, gone[1].previous_artifact) == (ChangeKind.REMOVED, _content("a"))
    at += MINUTE
    life(tick(MONITOR_ID), at)
    assert kinds(life(ended(life, JobStatus.DEAD_LETTER, http_status=410), at)) == ["CheckRecorded"]
    at += MINUTE
    back = check(life, _content("a"), "f1", at)  # the same bytes as before it went: still restored
    assert isinstance(back[-1], ChangeDetected)
    assert back[-1].kind is ChangeKind.RESTORED
    at += MINUTE
    life(tick(MONITOR_ID), at)
    failed = life(ended(life, JobStatus.DEAD_LETTER, http_status=503, failure_code="HTTP_503"), at)
    assert kinds(failed) == ["CheckRecorded"]  # a failure says nothing of the page


def test_missed_checks_collapse_into_one_that_says_how_many():
    life = Lifecycle()
    life(create())
    check(life, _content("a"), "f1", T0)
    (scheduled,) = life(tick(MONITOR_ID), T0 + MINUTE * 10 + timedelta(seconds=59))
    assert isinstance(scheduled, CheckScheduled)
    assert scheduled.missed == 9
    assert monitor(life).missed == 9


def test_a_result_for_any_other_job_changes_nothing():
    life = Lifecycle()
    life(create())
    life(tick(MONITOR_ID), T0)
    forged = RecordCheck(
        monitor_id=MONITOR_ID,
        command_id=uuid4(),
        check_job_id=uuid4(),
        status=JobStatus.SUCCEEDED,
        artifacts=(_content("x"),),
    )
    assert life(forged, T0) == []
    assert life(reading(life, "f1"), T0) == []  # nothing was fetched yet


def test_another_callers_job_named_like_a_check_is_fenced_by_its_monitor():
    life = Lifecycle()
    life(create())
    life(tick(MONITOR_ID), T0)
    intruder = Lifecycle()
    intruder(submit(caller_identity="svc-b", idempotency_key=check_key(MONITOR_ID, T0)))
    (result,) = check_result(*_ended(intruder.job))
    assert result.monitor_id == MONITOR_ID
    assert life(result, T0) == []


def test_pause_resume_and_edit_take_effect_at_the_next_due_time():
    life = Lifecycle()
    life(create())
    check(life, _content("a"), "f1", T0)
    assert kinds(life(act(PauseMonitor), T0)) == ["MonitorPaused", "AuditRecorded"]
    assert next_due_at(life.state, POLICY) is None
    assert life(tick(MONITOR_ID), T0 + MINUTE * 5) == []
    resumed = life(act(ResumeMonitor), T0 + MINUTE * 5)
    assert kinds(resumed) == ["MonitorResumed", "AuditRecorded"]
    due = next_due_at(life.state, POLICY)
    assert due is not None
    assert T0 + MINUTE * 5 < due <= T0 + MINUTE * 6  # checks missed while paused are not made
    hourly = msgspec.structs.replace(SPEC, schedule=MonitorSchedule(every_s=3600))
    edited, _ = life(act(EditMonitor, spec=hourly), T0 + MINUTE * 5)
    assert not edited.rebased  # type: ignore[union-attr]
    due = next_due_at(life.state, POLICY)
    assert due is not None
    assert T0 + MINUTE * 6 < due <= T0 + timedelta(hours=2)
    assert monitor(life).fingerprint == "f1"


@pytest.mark.parametrize(
    "changed",
    [{"select": "price"}, {"drop": ("^x",)}, {"insensitive": True}, {"product": True}, {"ignore": ("nav",)}],
)
def test_an_edit_of_how_a_page_is_read_starts_a_new_baseline_and_one_of_what_is_announced_does_not(changed):
    life = Lifecycle()
    life(create())
    edited, _ = life(act(EditMonitor, spec=msgspec.structs.replace(SPEC, **changed)), T0)
    assert edited.rebased  # type: ignore[union-attr]
    life = Lifecycle()
    life(create())
    edited, _ = life(act(EditMonitor, spec=msgspec.structs.replace(SPEC, trigger=("price",))), T0)
    assert not edited.rebased  # type: ignore[union-attr]


def test_an_edit_of_what_counts_starts_a_new_baseline():
    life = Lifecycle()
    life(create())
    check(life, _content("a"), "f1", T0)
    focused = msgspec.structs.replace(SPEC, watch=("main",))
    edited, _ = life(act(EditMonitor, spec=focused), T0)
    assert edited.rebased  # type: ignore[union-attr]
    at = T0 + MINUTE * 2
    events = check(life, _content("a"), "f9", at)  # the same bytes are read again, through the new focus
    assert isinstance(events[-1], ChangeDetected)
    assert events[-1].kind is ChangeKind.NEW
    (read,) = consequences_of(life.state, events[:1], POLICY).reads
    assert read.watch == ("main",)


def test_creating_again_is_idempotent_and_a_name_is_one_monitor_per_caller():
    life = Lifecycle()
    life(create())
    assert life(create()) == []
    other = msgspec.structs.replace(SPEC, request=Request(url="https://example.com/other"))
    assert denied(life(create(other))) == "conflict"  # in the actor's audit stream, not the monitor's
    assert monitor_id_for("svc-b", "pricing") != MONITOR_ID


def test_an_unusable_spec_is_refused_before_any_check():
    every_second = msgspec.structs.replace(SPEC, schedule=MonitorSchedule(every_s=1))
    bad_selector = msgspec.structs.replace(SPEC, watch=("main >>> p",))
    bad_window = msgspec.structs.replace(
        SPEC, schedule=MonitorSchedule(every_s=60, window=MonitorWindow(start_minute=0, end_minute=2000))
    )
    many_labels = msgspec.structs.replace(SPEC, labels={f"k{n}": "v" for n in range(100)})
    long_url = msgspec.structs.replace(SPEC, request=Request(url="https://example.com/" + "a" * 10_000))
    unusable = [
        create(every_second),
        create(bad_selector),
        create(bad_window),
        create(name=""),
        msgspec.structs.replace(create(), caller_identity=""),
        create(msgspec.structs.replace(SPEC, capture_mode=CaptureMode.METADATA_ONLY)),
        create(many_labels),
        create(long_url),
    ]
    for command in unusable:
        life = Lifecycle()
        assert denied(life(command)) == "invalid"
        assert life.state is None
    life = Lifecycle()
    life(create())
    assert denied(life(act(EditMonitor, spec=every_second))) == "invalid"


def test_a_deleted_monitor_makes_no_check_refuses_edits_and_can_be_created_again():
    life = Lifecycle()
    life(create())
    life(tick(MONITOR_ID), T0)
    assert kinds(life(act(DeleteMonitor))) == ["MonitorDeleted", "AuditRecorded"]
    assert life(fetched(life, _content("a")), T0) == []  # its check ends unrecorded
    assert next_due_at(life.state, POLICY) is None
    assert denied(life(act(PauseMonitor))) == "conflict"
    at = T0 + MINUTE * 3
    assert kinds(life(create(), at)) == ["MonitorCreated", "AuditRecorded"]
    assert next_due_at(life.state, POLICY) == at
    assert kinds(life(tick(MONITOR_ID), at)) == ["CheckScheduled"]


def test_a_window_keeps_the_first_check_until_it_opens():
    closed_now = MonitorWindow(start_minute=13 * 60, end_minute=14 * 60)  # T0 is 12:00 UTC
    spec = msgspec.structs.replace(SPEC, schedule=MonitorSchedule(every_s=600, window=closed_now))
    life = Lifecycle()
    life(create(spec))
    assert next_due_at(life.state, POLICY) == T0 + timedelta(hours=1)


def test_only_a_check_jobs_end_is_reported_to_a_monitor():
    life = Lifecycle()
    life(submit())
    assert check_result(*_ended(life.job)) == []
    life = Lifecycle()
    life(create())
    (scheduled,) = life(tick(MONITOR_ID), T0)
    (submission,) = consequences_of(life.state, [scheduled], POLICY).commands
    check_job = Lifecycle()
    check_job(submission)
    (result,) = check_result(*_ended(check_job.job))
    assert (result.check_job_id, result.status) == (check_job.job.job_id, JobStatus.SUCCEEDED)
    assert kinds(life(result, T0)) == ["CheckRecorded"]  # it stored nothing: nothing to compare


def _ended(job: Job) -> tuple[Job, JobCompleted]:
    terminal = updated(job, status=JobStatus.SUCCEEDED, completed_at=T0)
    completion = completion_of(terminal)
    assert completion is not None
    return terminal, completion


COMMANDS = st.sampled_from(
    ["tick", "fetch-a", "fetch-b", "read-1", "read-2", "gone", "fail", "pause", "resume"]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(COMMANDS, st.integers(min_value=0, max_value=600)), max_size=40))
def test_replaying_a_monitors_events_rebuilds_it_and_no_due_time_is_checked_twice(steps):
    life = Lifecycle()
    life(create())
    at = T0
    for name, seconds in steps:
        at += timedelta(seconds=seconds)
        pending = monitor(life).pending
        if name == "tick":
            life(tick(MONITOR_ID), at)
        elif name == "pause":
            life(act(PauseMonitor), at)
        elif name == "resume":
            life(act(ResumeMonitor), at)
        elif pending is not None and name.startswith("fetch"):
            life(fetched(life, _content(name[-1])), at)
        elif pending is not None and name.startswith("read"):
            life(reading(life, f"f{name[-1]}"), at)
        elif pending is not None:
            status = 404 if name == "gone" else 503
            life(ended(life, JobStatus.DEAD_LETTER, http_status=status), at)
    assert replay(life.events) == life.state
    scheduled = [event for event in life.events if isinstance(event, CheckScheduled)]
    assert len({event.due_at for event in scheduled}) == len(scheduled)
    assert len({event.check_job_id for event in scheduled}) == len(scheduled)
    assert all(a.due_at < b.due_at for a, b in itertools.pairwise(scheduled))
    recorded = [event for event in life.events if isinstance(event, CheckRecorded)]
    assert [event.check_job_id for event in recorded] == [event.check_job_id for event in scheduled][
        : len(recorded)
    ]


def test_only_its_own_service_operators_and_admins_change_a_monitor():
    life = Lifecycle()
    life(create())
    other = {"actor_id": "svc-b", "actor_role": ActorRole.SERVICE}
    viewer = {"actor_id": "svc-a", "actor_role": ActorRole.VIEWER}
    for actor, kind in ((other, "not_found"), (viewer, "forbidden")):  # another's is answered as none
        for command in (PauseMonitor, DeleteMonitor):
            assert denied(life(command(monitor_id=MONITOR_ID, command_id=uuid4(), **actor))) == kind
        edit = EditMonitor(monitor_id=MONITOR_ID, command_id=uuid4(), spec=SPEC, **actor)
        edited = msgspec.structs.replace(edit, spec=msgspec.structs.replace(SPEC, watch=("h1",)))
        assert denied(life(edited)) == kind
    assert kinds(life.events) == ["MonitorCreated", "AuditRecorded"]  # nothing of theirs in its history
    operator = {"actor_id": "ops", "actor_role": ActorRole.OPERATOR}
    paused = life(PauseMonitor(monitor_id=MONITOR_ID, command_id=uuid4(), **operator))
    assert kinds(paused) == ["MonitorPaused", "AuditRecorded"]


def test_a_service_creates_monitors_only_as_itself():
    as_other = msgspec.structs.replace(create(), submitted_by="svc-b", submitter_role=ActorRole.SERVICE)
    assert denied(Lifecycle()(as_other)) == "forbidden"
    by_admin = msgspec.structs.replace(create(), submitted_by="root", submitter_role=ActorRole.ADMIN)
    created, _ = Lifecycle()(by_admin)
    assert (created.actor_id, created.caller_identity) == ("root", "svc-a")  # type: ignore[union-attr]


def test_a_change_and_only_a_change_is_delivered_to_the_monitors_callback():
    hooked = msgspec.structs.replace(SPEC, callback_url="https://hooks.example.com/changes")
    life = Lifecycle()
    life(create(hooked))
    events = check(life, _content("a"), "f1", T0)
    (due,) = consequences_of(life.state, events, POLICY).callbacks
    assert due.completion is None
    assert due.change is not None
    assert (due.change.kind, due.change.monitor_id, due.job_id) == (ChangeKind.NEW, MONITOR_ID, MONITOR_ID)
    failed = callback_report(due.webhook_id, 1, 503)
    assert kinds(life(failed, T0)) == ["CallbackRetryScheduled"]
    retry_at = next_due_at(life.state, POLICY)
    assert retry_at is not None
    assert kinds(life(tick(MONITOR_ID), retry_at)) == ["CallbackDispatched"]
    (again,) = consequences_of(life.state, life.events[-1:], POLICY).callbacks
    assert (again.webhook_id, again.attempt_number) == (due.webhook_id, 2)
    assert kinds(life(callback_report(due.webhook_id, 2, 204), retry_at)) == ["CallbackDelivered"]
    assert monitor(life).callbacks == ()
    at = T0 + MINUTE * 2
    life(tick(MONITOR_ID), at)
    unchanged = life(fetched(life, _content("a")), at)  # the same bytes: no change, no callback
    assert kinds(unchanged) == ["CheckRecorded"]
    assert consequences_of(life.state, unchanged, POLICY).callbacks == []
    assert replay(life.events) == life.state


def test_monitors_created_together_spread_their_first_checks_by_their_jitter():
    jittered = msgspec.structs.replace(SPEC, schedule=MonitorSchedule(every_s=60, jitter_s=60))
    firsts = []
    for n in range(20):
        life = Lifecycle()
        life(create(jittered, name=f"m{n}"))
        firsts.append(next_due_at(life.state, POLICY))
    assert all(first is not None and T0 <= first <= T0 + MINUTE for first in firsts)
    assert len(set(firsts)) > 10


@settings(max_examples=30, deadline=None)
@given(every_s=st.sampled_from([10, 30, 60, 3600]), spread_s=st.sampled_from([5, 10, 60]))
def test_monitors_created_together_with_no_jitter_spread_their_first_checks_within_the_spread(
    every_s: int, spread_s: int
):
    spread = dataclasses.replace(POLICY, first_check_spread_s=spread_s)
    plain = msgspec.structs.replace(SPEC, schedule=MonitorSchedule(every_s=every_s))
    firsts = []
    for n in range(40):
        life = Lifecycle(policy=spread)
        life(create(plain, name=f"burst-{n}"))
        firsts.append(next_due_at(life.state, spread))
    within = timedelta(seconds=min(every_s, spread_s))
    assert all(first is not None and T0 <= first <= T0 + within for first in firsts)
    assert len(set(firsts)) > min(every_s, spread_s) // 3  # not one instant for the whole burst


def test_operators_replay_the_latest_changes_callback_under_its_first_webhook_id():
    hooked = msgspec.structs.replace(SPEC, callback_url="https://hooks.example.com/changes")
    life = Lifecycle()
    life(create(hooked))

    def replay_as(actor: str, role: ActorRole, **fields: Any) -> list[Event]:
        command = ReplayCallback(
            command_id=uuid4(), job_id=MONITOR_ID, actor_id=actor, actor_role=role, reason="lost it", **fields
        )
        return life(command, T0)

    (refused,) = replay_as("ops", ActorRole.OPERATOR)  # no change yet: refused in the actor's audit stream
    assert (refused.outcome, refused.refusal) == (AuditOutcome.DENIED, "conflict")  # type: ignore[union-attr]
    events = check(life, _content("a"), "f1", T0)
    (due,) = consequences_of(life.state, events, POLICY).callbacks
    life(callback_report(due.webhook_id, 1, 204), T0)
    assert [e.refusal for e in replay_as("svc-a", ActorRole.SERVICE)] == ["forbidden"]  # type: ignore[attr-defined]
    assert [e.refusal for e in replay_as("svc-b", ActorRole.SERVICE)] == ["not_found"]  # type: ignore[attr-defined]
    replayed = replay_as("ops", ActorRole.OPERATOR, callback_url="https://other.example.com/hook")
    assert kinds(replayed) == ["CallbackReplayed", "AuditRecorded"]
    assert replayed[1].target == f"monitor:{MONITOR_ID}"  # type: ignore[union-attr]
    (again,) = consequences_of(life.state, replayed, POLICY).callbacks
    assert (again.webhook_id, again.replay, again.callback_url) == (
        due.webhook_id,
        1,
        "https://other.example.com/hook",
    )
    assert again.change == due.change
    in_flight = replay_as("ops", ActorRole.OPERATOR)  # the replay's own delivery is still under way
    assert [e.refusal for e in in_flight] == ["conflict"]  # type: ignore[attr-defined]
    assert monitor(life).callback_replays == 1
    assert replay(life.events) == life.state


def test_a_reading_report_larger_than_a_reader_writes_is_cut_to_the_bound():
    life = Lifecycle()
    life(create())
    life(tick(MONITOR_ID), T0)
    life(fetched(life, _content("a")), T0)
    huge = reading(life, "f" * 10_000, diff="+x\n" * 100_000)
    change = life(huge, T0)[-1]
    assert isinstance(change, ChangeDetected)
    assert len(change.diff) <= MAX_DIFF_CHARS
    assert change.diff_truncated
    assert change.fingerprint is not None
    assert len(change.fingerprint) <= 128


def test_a_304_onto_other_stored_bytes_is_recorded_as_the_304_the_origin_answered():
    life = Lifecycle()
    life(create())
    check(life, _content("a"), "fa", T0)
    at = T0 + MINUTE
    life(tick(MONITOR_ID), at)
    revalidated = ended(
        life, outcome=AttemptOutcome.NOT_MODIFIED, http_status=304, artifacts=(_content("b"),)
    )
    assert kinds(life(revalidated, at)) == ["CheckFetched"]
    recorded = [e for e in life(reading(life, "fb", diff="-a\n+b\n"), at) if isinstance(e, CheckRecorded)]
    assert recorded[0].http_status == 304
    assert replay(life.events) == life.state
