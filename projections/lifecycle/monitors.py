"""A monitor's rules: created, edited, paused, resumed, deleted; one check at a time, each a job whose
id follows from the monitor and its due time; a check's result compared with what it saw before.

`decide_monitor` and `evolve_monitor` are the monitor's part of `decide` and `evolve`. Due times come
from `projections.monitors.schedule` and are written into the events, so a replay never depends on
the time zone database it runs with.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any
from uuid import UUID

from projections.artifacts import PNG, content_key
from projections.lifecycle.audit import audit
from projections.lifecycle.callbacks import start_callback
from projections.lifecycle.completion import webhook_id_of
from projections.lifecycle.emit import Emitter
from projections.lifecycle.identity import (
    MONITOR_NAMESPACE,
    Rejection,
    callback_url_problem,
    canonicalize,
    job_id_for,
    monitor_target,
    name_based,
)
from projections.lifecycle.limits import (
    MAX_CALLBACK_URL_BYTES,
    MAX_CALLER_BYTES,
    MAX_REASON_BYTES,
    MAX_URL_BYTES,
    clip,
    oversized_field,
    oversized_labels,
    utf8_len,
)
from projections.lifecycle.state import Monitor, State, updated
from projections.lifecycle.submission import BROWSER_RENDER, render_problem, renders
from projections.monitors.changes import GONE_STATUSES, Seen, change_of
from projections.monitors.content import MAX_DIFF_CHARS, Focus, focus_problem
from projections.monitors.offers import bounded, offer_kinds
from projections.monitors.patterns import patterns_problem
from projections.monitors.schedule import (
    Due,
    Schedule,
    Window,
    due_at,
    in_window,
    jitter_of,
    next_due,
    offset_of,
    schedule_problem,
)
from projections.monitors.selection import select_problem
from schemas.commands import (
    CheckTimers,
    CreateMonitor,
    DeleteMonitor,
    EditMonitor,
    MonitorCommand,
    PauseMonitor,
    RecordCheck,
    ReportCheckReading,
    ResumeMonitor,
)
from schemas.enums import (
    ActorRole,
    AttemptOutcome,
    AuditAction,
    AuditOutcome,
    CaptureMode,
    ChangeKind,
    JobStatus,
    RetentionClass,
)
from schemas.events import (
    CallbackReplayed,
    ChangeDetected,
    CheckFetched,
    CheckRecorded,
    CheckScheduled,
    Event,
    MonitorCreated,
    MonitorDeleted,
    MonitorEdited,
    MonitorEvent,
    MonitorPaused,
    MonitorRefused,
    MonitorResumed,
)
from schemas.records import Artifact, MonitorSchedule, MonitorSpec, OfferChange, VisualDifference
from schemas.types import uuid_text
from schemas.work import CallbackDue, MonitorChange

CHECK_KEY_PREFIX = "scrapestream.monitor:"
MAX_NAME_BYTES = 200
# A check gives up after this long; the monitor makes one check at a time, so a stuck one holds it no longer.
CHECK_DEADLINE = timedelta(minutes=10)
MAX_FINGERPRINT_CHARS = 128
MONITOR_CONTROLLERS = frozenset({ActorRole.OPERATOR, ActorRole.ADMIN})
ChangingMonitor = CreateMonitor | EditMonitor | PauseMonitor | ResumeMonitor | DeleteMonitor
CHANGING_MONITORS = (CreateMonitor, EditMonitor, PauseMonitor, ResumeMonitor, DeleteMonitor)
MONITOR_ACTIONS: dict[type[ChangingMonitor], AuditAction] = {
    CreateMonitor: AuditAction.MONITOR_CREATE,
    EditMonitor: AuditAction.MONITOR_EDIT,
    PauseMonitor: AuditAction.MONITOR_PAUSE,
    ResumeMonitor: AuditAction.MONITOR_RESUME,
    DeleteMonitor: AuditAction.MONITOR_DELETE,
}


def monitor_id_for(caller_identity: str, name: str) -> UUID:
    return name_based(MONITOR_NAMESPACE, f"{caller_identity}\n{name}")


def check_key(monitor_id: UUID, due: datetime) -> str:
    """The idempotency key of a monitor's check job: one job per monitor and due time."""
    return f"{CHECK_KEY_PREFIX}{uuid_text(monitor_id)}:{int(due.timestamp() * 1000)}"


def reserved_key_problem(idempotency_key: str | None) -> str | None:
    """Why a caller's submission may not use `idempotency_key`: its prefix names monitor checks."""
    if idempotency_key is not None and idempotency_key.startswith(CHECK_KEY_PREFIX):
        return f"idempotency keys starting with {CHECK_KEY_PREFIX!r} are reserved for monitor checks"
    return None


def checked_monitor(idempotency_key: str) -> UUID | None:
    """The monitor a check job's idempotency key names, or None for any other job."""
    if not idempotency_key.startswith(CHECK_KEY_PREFIX):
        return None
    monitor, _, due_ms = idempotency_key[len(CHECK_KEY_PREFIX) :].partition(":")
    try:
        return UUID(monitor) if due_ms.isdigit() else None
    except ValueError:
        return None


def schedule_of(schedule: MonitorSchedule) -> Schedule:
    window = schedule.window
    return Schedule(
        every_s=schedule.every_s,
        cron=schedule.cron,
        time_zone=schedule.time_zone,
        jitter_s=schedule.jitter_s,
        window=None
        if window is None
        else Window(
            start=_minute(window.start_minute),
            end=_minute(window.end_minute),
            days=frozenset(window.weekdays),
        ),
    )


def spec_problem(spec: MonitorSpec) -> str | None:
    """Why a monitor cannot be kept with this spec, in words a caller can act on; None when it can."""
    window = spec.schedule.window
    if window is not None and not all(0 <= m < 1440 for m in (window.start_minute, window.end_minute)):
        return "a window's start_minute and end_minute are from 0 to 1439"
    if spec.capture_mode is CaptureMode.METADATA_ONLY:
        return "a monitor compares what its checks store: capture_mode METADATA_ONLY stores no content"
    canonical = canonicalize(spec.request)
    problems = (
        _oversized(spec),
        canonical.detail if isinstance(canonical, Rejection) else None,
        schedule_problem(schedule_of(spec.schedule)),
        focus_problem(Focus(spec.watch, spec.ignore)),
        None if spec.select is None else select_problem(spec.select),
        "select reads a JSON document, watch and ignore an HTML page: give one or the other"
        if spec.select is not None and (spec.watch or spec.ignore)
        else None,
        "product compares a page's offer, not its text: it takes no select, watch or ignore"
        if spec.product and (spec.select is not None or spec.watch or spec.ignore)
        else None,
        None if spec.visual_threshold is None else _visual_problem(spec),
        patterns_problem("trigger", spec.trigger),
        patterns_problem("drop", spec.drop),
        None if spec.callback_url is None else callback_url_problem(spec.callback_url),
        None if spec.render is None else render_problem(spec.render),
    )
    return next((problem for problem in problems if problem is not None), None)


def _what_counts(spec: MonitorSpec) -> tuple[object, ...]:
    """What a check's reading depends on: an edit of any of it starts a new baseline."""
    return (
        spec.request,
        spec.job_type,
        spec.capture_mode,
        spec.watch,
        spec.ignore,
        spec.select,
        spec.drop,
        spec.insensitive,
        spec.product,
        spec.visual_threshold,
    )


def _visual_problem(spec: MonitorSpec) -> str | None:
    threshold = spec.visual_threshold
    if threshold is None or not 0 <= threshold < 1:
        return "visual_threshold is a share of pixels, from 0 up to (not including) 1"
    if not renders(spec.job_type, spec.transport_policy) or spec.capture_mode is not CaptureMode.SCREENSHOT:
        return f"a visual monitor compares screenshots: job_type {BROWSER_RENDER}, capture_mode SCREENSHOT"
    if (
        spec.select
        or spec.watch
        or spec.ignore
        or spec.product
        or spec.trigger
        or spec.drop
        or spec.insensitive
    ):
        return "a visual monitor compares pixels: it takes no select, watch, ignore, product, trigger or drop"
    return None


def _oversized(spec: MonitorSpec) -> str | None:
    """A spec its checks' submissions could not carry."""
    return oversized_field(
        {
            "url": (spec.request.url, MAX_URL_BYTES),
            "callback_url": (spec.callback_url, MAX_CALLBACK_URL_BYTES),
            "job_type": (spec.job_type, MAX_CALLER_BYTES),
        }
    ) or oversized_labels(spec.labels)


def monitor_actor(command: ChangingMonitor) -> tuple[str, ActorRole]:
    if isinstance(command, CreateMonitor):
        return command.submitted_by or command.caller_identity, command.submitter_role or ActorRole.SERVICE
    return command.actor_id, command.actor_role


def audit_monitor_change(emit: Emitter, command: ChangingMonitor, done: str) -> None:
    """An allowed creation or change of a monitor, in its own history."""
    actor_id, actor_role = monitor_actor(command)
    audit(
        emit,
        actor_id=actor_id,
        actor_role=actor_role,
        action=MONITOR_ACTIONS[type(command)],
        outcome=AuditOutcome.ALLOWED,
        detail=done,
        target=monitor_target(emit.job_id),
        reason=getattr(command, "reason", ""),
        request_id=command.request_id,
    )


def name_taken(command: CreateMonitor) -> str:
    return f"{clip(command.caller_identity, 64)} has a monitor named {clip(command.name, 64)!r}: edit it"


def name_problem(caller_identity: str, name: str) -> str | None:
    """Why a monitor cannot be named so (its id is derived from the caller and the name), or None."""
    if not 0 < utf8_len(name) <= MAX_NAME_BYTES or not name.isprintable():
        return f"a monitor's name is 1 to {MAX_NAME_BYTES} bytes of printable text"
    if not caller_identity:
        return "a monitor belongs to a caller: caller_identity is empty"
    return oversized_field({"caller_identity": (caller_identity, MAX_CALLER_BYTES)})


def creation_refusal(command: CreateMonitor) -> str | None:
    """Why the verified submitter may not create this monitor, or None: a service watches as itself."""
    submitter, role = command.submitted_by, command.submitter_role
    if submitter is None or role in MONITOR_CONTROLLERS or submitter == command.caller_identity:
        return None
    return f"{clip(submitter, 64)} may create monitors only as itself"


def change_refusal(state: Monitor, actor_id: str, actor_role: ActorRole) -> str | None:
    """Why an actor may not edit, pause, resume or delete this monitor, or None: its owner, operators
    and admins may."""
    if actor_role in MONITOR_CONTROLLERS or (actor_role is ActorRole.SERVICE and actor_id == state.owner):
        return None
    return "only a monitor's own service, operators and admins change it"


def first_due(spec: MonitorSpec, monitor_id: UUID, created_at: datetime, spread_s: int) -> datetime | None:
    """A new monitor's first check, for a baseline: soon, later by its jitter or, with none, by an
    offset of its own within `spread_s` (monitors created together do not check together), unless
    its window is closed then."""
    schedule = schedule_of(spec.schedule)
    within_s = min(spread_s, schedule.every_s or spread_s)
    offset = jitter_of(schedule, monitor_id) or offset_of(monitor_id, within_s)
    at = created_at + timedelta(seconds=offset)
    return at if in_window(schedule, at) else next_due(schedule, monitor_id, at)


def decide_create(
    state: State, command: CreateMonitor, command_id: UUID, now: datetime, spread_s: int
) -> list[Event]:
    monitor_id = monitor_id_for(command.caller_identity, command.name)
    if not (state is None or isinstance(state, Monitor)):
        return []
    if name_problem(command.caller_identity, command.name) or creation_refusal(command):
        return []  # the API refuses it before it is sent; one written past it changes nothing
    emit = Emitter(command_id, monitor_id, 0 if state is None else state.sequence, now)
    if isinstance(state, Monitor) and not state.deleted:
        if state.spec != command.spec:
            emit(MonitorRefused, command="CreateMonitor", reason="name_taken", detail=name_taken(command))
        return emit.events
    problem = spec_problem(command.spec)
    if problem is not None:
        if isinstance(state, Monitor):
            emit(MonitorRefused, command="CreateMonitor", reason="invalid_spec", detail=clip(problem))
        return emit.events  # a refused first creation leaves no stream: the API says why
    emit(
        MonitorCreated,
        caller_identity=command.caller_identity,
        name=command.name,
        spec=command.spec,
        actor_id=command.submitted_by or command.caller_identity,
        actor_role=command.submitter_role or ActorRole.SERVICE,
        next_due_at=first_due(command.spec, monitor_id, now, spread_s),
    )
    audit_monitor_change(emit, command, "created")
    return emit.events


def decide_monitor(state: Monitor, command: MonitorCommand | CheckTimers, emit: Emitter) -> None:
    if _held_back(state, command, emit):
        return
    match command:
        case EditMonitor():
            _edit(state, command, emit)
        case PauseMonitor() if not state.paused:
            emit(MonitorPaused, **_actor(command), reason=command.reason)
            audit_monitor_change(emit, command, "paused")
        case ResumeMonitor() if state.paused:
            next_at = next_due(schedule_of(state.spec.schedule), state.monitor_id, emit.now)
            emit(MonitorResumed, **_actor(command), reason=command.reason, next_due_at=next_at)
            audit_monitor_change(emit, command, "resumed")
        case DeleteMonitor():
            emit(MonitorDeleted, **_actor(command), reason=command.reason)
            audit_monitor_change(emit, command, "deleted")
        case CheckTimers():
            _schedule_check(state, emit)
        case RecordCheck():
            _record(state, command, emit)
        case ReportCheckReading():
            _read(state, command, emit)
        case _:
            return  # a pause of a paused monitor, a resume of a running one, a creation (decided apart)


def _held_back(state: Monitor, command: MonitorCommand | CheckTimers, emit: Emitter) -> bool:
    """Whether the command changes nothing: its actor may not, or the monitor is deleted (then an
    edit, pause or resume is refused where its actor can read why)."""
    changing = isinstance(command, EditMonitor | PauseMonitor | ResumeMonitor | DeleteMonitor)
    if changing and change_refusal(state, **_actor(command)) is not None:
        return True  # the API refuses it before it is sent; one written past it changes nothing
    if not state.deleted:
        return False
    if changing and not isinstance(command, DeleteMonitor):
        name = type(command).__name__
        emit(MonitorRefused, command=name, reason="deleted", detail="the monitor is deleted")
    return True


def _edit(state: Monitor, command: EditMonitor, emit: Emitter) -> None:
    if command.spec == state.spec:
        return
    problem = spec_problem(command.spec)
    if problem is not None:
        emit(MonitorRefused, command="EditMonitor", reason="invalid_spec", detail=clip(problem))
        return
    before, after = state.spec, command.spec
    rebased = _what_counts(before) != _what_counts(after)
    emit(
        MonitorEdited,
        spec=after,
        actor_id=command.actor_id,
        actor_role=command.actor_role,
        rebased=rebased,
        next_due_at=next_due(schedule_of(after.schedule), state.monitor_id, emit.now),
    )
    audit_monitor_change(emit, command, "edited")


def _schedule_check(state: Monitor, emit: Emitter) -> None:
    first = state.next_due_at
    if state.paused or state.pending is not None or first is None or first > emit.now:
        return
    later = due_at(schedule_of(state.spec.schedule), state.monitor_id, first, emit.now)
    due = Due(first, 0) if later is None else Due(later.at, later.missed + 1)
    emit(
        CheckScheduled,
        check_job_id=job_id_for(state.owner, check_key(state.monitor_id, due.at)),
        due_at=due.at,
        missed=due.missed,
    )


def _record(state: Monitor, command: RecordCheck, emit: Emitter) -> None:
    pending = state.pending
    if pending is None or pending.check_job_id != command.check_job_id or state.fetched is not None:
        return  # stale: not the check being made, or already read
    content = _content(command.artifacts, visual=state.spec.visual_threshold is not None)
    fetched = command.status is JobStatus.SUCCEEDED and content is not None
    if fetched and content is not None and (content.key != _key(state.artifact) or state.gone):
        emit(
            CheckFetched, check_job_id=pending.check_job_id, artifact=content, http_status=command.http_status
        )
        return
    http_status = command.http_status or 0
    if fetched or command.outcome is AttemptOutcome.NOT_MODIFIED:
        # The same stored bytes as the last content read: unchanged, nothing to read.
        _recorded(
            state,
            emit,
            command.status,
            http_status or None,
            fingerprint=state.fingerprint,
            artifact=state.artifact,
        )
        return
    change, _ = change_of(Seen(state.fingerprint, state.gone), http_status, None)
    detail = clip(command.failure_code or f"the check ended {command.status}")
    _recorded(state, emit, command.status, command.http_status, change=change, detail=detail)


def _read(state: Monitor, command: ReportCheckReading, emit: Emitter) -> None:
    pending, fetched = state.pending, state.fetched
    if pending is None or fetched is None or pending.check_job_id != command.check_job_id:
        return
    if command.fingerprint is None:
        detail = clip(command.problem or "the content could not be read")
        _recorded(state, emit, JobStatus.SUCCEEDED, None, detail=detail)
        return
    fingerprint = command.fingerprint[:MAX_FINGERPRINT_CHARS]
    visual = _visual(state.spec, command.visual)
    announced = command.triggered if visual is None else visual.ratio > visual.threshold
    change, _ = change_of(Seen(state.fingerprint, state.gone), 200, fingerprint, announced=announced)
    answered = state.fetched_status or 200  # a 304 onto other stored bytes says 304
    _recorded(
        state, emit, JobStatus.SUCCEEDED, answered, change=change, fingerprint=fingerprint, artifact=fetched
    )
    if change is not None:
        emit(
            ChangeDetected,
            check_job_id=pending.check_job_id,
            kind=change,
            previous_artifact=state.artifact,
            current_artifact=fetched,
            fingerprint=fingerprint,
            diff=command.diff[:MAX_DIFF_CHARS],  # as the reader bounds it, whoever wrote the report
            diff_truncated=command.diff_truncated or len(command.diff) > MAX_DIFF_CHARS,
            lines_added=command.lines_added,
            lines_removed=command.lines_removed,
            word_diff=command.word_diff[:MAX_DIFF_CHARS],
            offer=_offer_change(change, command),
            visual=visual,
        )


def _visual(spec: MonitorSpec, reported: VisualDifference | None) -> VisualDifference | None:
    """A visual monitor's difference, against its own threshold; a ratio out of range is all changed."""
    if reported is None or spec.visual_threshold is None:
        return None
    ratio = reported.ratio if 0 <= reported.ratio <= 1 else 1.0
    difference = reported.difference
    if difference is not None and (
        difference.content_type != PNG
        or difference.key != content_key(difference.sha256, RetentionClass.CACHE_7D)
    ):
        difference = None  # no image a check read stores: nothing the monitor's readers may be served
    return VisualDifference(ratio=ratio, threshold=spec.visual_threshold, difference=difference)


def _offer_change(change: ChangeKind, command: ReportCheckReading) -> OfferChange | None:
    """A product monitor's change, typed: what the offer was, is, and how it changed."""
    current, previous = bounded(command.offer), bounded(command.previous_offer)
    if current is None:
        return None
    kinds = offer_kinds(previous, current) if change is ChangeKind.CHANGED else ()
    return OfferChange(kinds=kinds, previous=previous, current=current)


def _recorded(
    state: Monitor,
    emit: Emitter,
    status: JobStatus,
    http_status: int | None,
    *,
    change: ChangeKind | None = None,
    fingerprint: str | None = None,
    artifact: Artifact | None = None,
    detail: str = "",
) -> None:
    pending = state.pending
    if pending is None:
        return
    emit(
        CheckRecorded,
        check_job_id=pending.check_job_id,
        due_at=pending.due_at,
        status=status,
        http_status=http_status,
        change=change,
        fingerprint=fingerprint,
        artifact=artifact,
        detail=detail,
        next_due_at=next_due(schedule_of(state.spec.schedule), state.monitor_id, pending.due_at),
    )
    if change is ChangeKind.REMOVED:
        emit(ChangeDetected, check_job_id=pending.check_job_id, kind=change, previous_artifact=state.artifact)


def evolve_monitor(state: State, event: MonitorEvent) -> Monitor | None:  # noqa: C901 - one flat case per event
    """The monitor after `event`; None when the event is no monitor's (left to the caller)."""
    if isinstance(event, MonitorCreated) and (state is None or isinstance(state, Monitor)):
        before = state
        return Monitor(
            created=event,
            spec=event.spec,
            sequence=event.sequence,
            next_due_at=event.next_due_at,
            callbacks=() if before is None else before.callbacks,
            recent_command_ids=() if before is None else before.recent_command_ids,
            recent_command_at=() if before is None else before.recent_command_at,
        )
    if not isinstance(state, Monitor):
        return None
    match event:
        case MonitorEdited():
            if event.rebased:
                state = updated(state, fingerprint=None, artifact=None, gone=False)
            return updated(state, spec=event.spec, next_due_at=event.next_due_at)
        case MonitorPaused():
            return updated(
                state, paused=True, pause_reason=clip(event.reason, MAX_REASON_BYTES)
            )  # a Kafka command is not bounded by the HTTP body
        case MonitorResumed():
            return updated(state, paused=False, pause_reason="", next_due_at=event.next_due_at)
        case MonitorDeleted():
            return updated(state, deleted=True)
        case CheckScheduled():
            return updated(
                state,
                pending=event,
                last_due_at=event.due_at,
                next_due_at=None,
                missed=state.missed + event.missed,
            )
        case CheckFetched():
            return updated(state, fetched=event.artifact, fetched_status=event.http_status)
        case CheckRecorded():
            return _after_check(state, event)
        case ChangeDetected():
            return _changed(state, event)
        case MonitorRefused():
            return state
    return state


def _changed(state: Monitor, event: ChangeDetected) -> Monitor:
    """One change more, and its callback to deliver when the monitor has a receiver."""
    change, webhook_id = monitor_change(state, event), webhook_id_of(event)
    state = updated(state, changes=state.changes + 1, last_change=change, last_change_webhook_id=webhook_id)
    url = state.spec.callback_url
    if url is None:
        return state
    due = CallbackDue(job_id=state.monitor_id, callback_url=url, webhook_id=webhook_id, change=change)
    return updated(state, callbacks=(*state.callbacks, start_callback(due, event.occurred_at)))


def replayed(state: Monitor, event: CallbackReplayed) -> Monitor:
    """The latest change's callback to deliver again, under its first webhook-id."""
    if state.last_change is None:
        return state
    replay = state.callback_replays + 1
    due = CallbackDue(
        job_id=state.monitor_id,
        callback_url=event.callback_url,
        webhook_id=event.webhook_id,
        change=state.last_change,
        replay=replay,
    )
    callbacks = (*state.callbacks, start_callback(due, event.occurred_at))
    return updated(state, callbacks=callbacks, callback_replays=replay)


def _after_check(state: Monitor, event: CheckRecorded) -> Monitor:
    state = updated(
        state,
        pending=None,
        fetched=None,
        fetched_status=None,
        checks=state.checks + 1,
        next_due_at=event.next_due_at,
    )
    if event.http_status in GONE_STATUSES:
        return updated(state, gone=True)
    if event.fingerprint is not None:
        return updated(state, fingerprint=event.fingerprint, artifact=event.artifact, gone=False)
    return state


def monitor_timer(state: Monitor) -> datetime | None:
    """When a timer must next look at the monitor: its next due time, unless no check may start."""
    if state.deleted or state.paused or state.pending is not None:
        return None
    return state.next_due_at


def _actor(command: MonitorCommand | CheckTimers) -> dict[str, Any]:
    if isinstance(command, EditMonitor | PauseMonitor | ResumeMonitor | DeleteMonitor):
        return {"actor_id": command.actor_id, "actor_role": command.actor_role}
    return {}


def _content(artifacts: tuple[Artifact, ...], *, visual: bool) -> Artifact | None:
    """What a check compares: its first artifact, or a visual monitor's screenshot."""
    if visual:
        return next((artifact for artifact in artifacts if artifact.content_type == PNG), None)
    return artifacts[0] if artifacts else None


def _key(artifact: Artifact | None) -> str | None:
    return None if artifact is None else artifact.key


def _minute(minutes: int) -> time:
    return time(minutes // 60 % 24, minutes % 60)


def monitor_change(state: Monitor, change: ChangeDetected) -> MonitorChange:
    """What a change is to those who read the changes topic or receive its callback."""
    return MonitorChange(
        monitor_id=state.monitor_id,
        caller_identity=state.owner,
        name=state.created.name,
        url=state.spec.request.url,
        check_job_id=change.check_job_id,
        detected_at=change.occurred_at,
        kind=change.kind,
        previous_artifact=change.previous_artifact,
        current_artifact=change.current_artifact,
        fingerprint=change.fingerprint,
        diff=change.diff,
        diff_truncated=change.diff_truncated,
        lines_added=change.lines_added,
        lines_removed=change.lines_removed,
        labels=state.spec.labels,
        word_diff=change.word_diff,
        offer=change.offer,
        visual=change.visual,
    )
