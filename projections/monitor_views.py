"""Read-side views of monitors: the monitor, its checks and the changes they found, as the HTTP API
returns them (its OpenAPI document is generated from these models)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Literal, TypeVar
from uuid import UUID

from pydantic import Field

from projections.lifecycle.identity import shown_url
from projections.lifecycle.monitors import schedule_of
from projections.lifecycle.state import Monitor
from projections.views import ArtifactView, View, artifact_view
from schemas.enums import CaptureMode, ChangeKind, JobStatus, OfferChangeKind
from schemas.events import ChangeDetected, CheckRecorded, CheckScheduled, Event
from schemas.records import MonitorSchedule, Offer, OfferChange, VisualDifference

V = TypeVar("V")


class WindowView(View):
    start: str  # HH:MM, in the schedule's time zone
    end: str
    weekdays: list[int]


class ScheduleView(View):
    every_s: int | None
    cron: str | None
    time_zone: str
    jitter_s: int
    window: WindowView | None


class MonitorView(View):
    monitor_id: UUID
    name: str
    caller_identity: str
    url: str
    state: Literal["active", "paused", "deleted"]
    pause_reason: str = Field(default="", description="What its pause said, while paused")
    schedule: ScheduleView
    job_type: str
    capture_mode: CaptureMode
    conditional: bool
    watch: list[str]
    ignore: list[str]
    select: str | None
    trigger: list[str]
    drop: list[str]
    insensitive: bool
    product: bool
    visual_threshold: float | None
    callback_url: str | None
    labels: dict[str, str]
    created_at: datetime
    next_check_at: datetime | None
    checking: UUID | None  # the check job under way
    last_due_at: datetime | None
    page_gone: bool
    fingerprint: str | None
    checks: int
    changes: int
    missed: int


class CheckView(View):
    check_job_id: UUID
    due_at: datetime
    missed: int
    recorded_at: datetime | None  # None while it runs
    status: JobStatus | None
    http_status: int | None
    change: ChangeKind | None
    detail: str


class OfferView(View):
    amount: str | None = Field(description="The price, an exact decimal number in text")
    currency: str | None
    availability: str | None = Field(description="schema.org ItemAvailability: InStock, OutOfStock...")


class OfferChangeView(View):
    kinds: list[OfferChangeKind]
    previous: OfferView | None
    current: OfferView | None


class VisualView(View):
    ratio: float = Field(description="The share of pixels that changed, 0 to 1")
    threshold: float
    difference: ArtifactView | None = Field(
        description="The later screenshot, its changed pixels in red (PNG; download_path is the monitor's)"
    )


class ChangeView(View):
    check_job_id: UUID
    detected_at: datetime
    kind: ChangeKind
    diff: str
    diff_truncated: bool
    lines_added: int
    lines_removed: int
    fingerprint: str | None
    previous_artifact: ArtifactView | None
    current_artifact: ArtifactView | None
    # Defaulted: a change kept in the store by an earlier release is read without them.
    word_diff: str = ""
    offer: OfferChangeView | None = Field(default=None, description="A product monitor's change, typed")
    visual: VisualView | None = Field(default=None, description="A visual monitor's change: pixels, image")


class FeedEntry(View):
    """A change with the monitor it belongs to, as a feed lists it."""

    monitor_id: UUID
    name: str
    url: str
    change: ChangeView


class MonitorList(View):
    items: list[MonitorView]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null at the end")


class CheckList(View):
    monitor_id: UUID
    items: list[CheckView]


class ChangeList(View):
    monitor_id: UUID
    items: list[ChangeView]


def monitor_view(monitor: Monitor) -> MonitorView:
    spec = monitor.spec
    state: Literal["active", "paused", "deleted"] = (
        "deleted" if monitor.deleted else "paused" if monitor.paused else "active"
    )
    return MonitorView(
        monitor_id=monitor.monitor_id,
        name=monitor.created.name,
        caller_identity=monitor.owner,
        url=shown_url(spec.request.url),
        state=state,
        pause_reason=monitor.pause_reason if monitor.paused else "",
        schedule=schedule_view(spec.schedule),
        job_type=spec.job_type,
        capture_mode=spec.capture_mode,
        conditional=spec.conditional,
        watch=list(spec.watch),
        ignore=list(spec.ignore),
        select=spec.select,
        trigger=list(spec.trigger),
        drop=list(spec.drop),
        insensitive=spec.insensitive,
        product=spec.product,
        visual_threshold=spec.visual_threshold,
        callback_url=None if spec.callback_url is None else shown_url(spec.callback_url),
        labels=spec.labels,
        created_at=monitor.created.occurred_at,
        next_check_at=None if monitor.deleted or monitor.paused else monitor.next_due_at,
        checking=None if monitor.pending is None else monitor.pending.check_job_id,
        last_due_at=monitor.last_due_at,
        page_gone=monitor.gone,
        fingerprint=monitor.fingerprint,
        checks=monitor.checks,
        changes=monitor.changes,
        missed=monitor.missed,
    )


def schedule_view(schedule: MonitorSchedule) -> ScheduleView:
    """A schedule as the API shows it: the one the rules keep (`schedule_of`), its times as HH:MM."""
    kept = schedule_of(schedule)
    window = kept.window
    return ScheduleView(
        every_s=kept.every_s,
        cron=kept.cron,
        time_zone=kept.time_zone,
        jitter_s=kept.jitter_s,
        window=None
        if window is None
        else WindowView(
            start=f"{window.start:%H:%M}", end=f"{window.end:%H:%M}", weekdays=sorted(window.days)
        ),
    )


def check_views(events: Iterable[Event]) -> list[CheckView]:
    """Each check a monitor made, newest first: when it was due, and what it found once recorded."""
    checks: dict[UUID, CheckView] = {}
    for event in events:
        if isinstance(event, CheckScheduled):
            checks[event.check_job_id] = CheckView(
                check_job_id=event.check_job_id,
                due_at=event.due_at,
                missed=event.missed,
                recorded_at=None,
                status=None,
                http_status=None,
                change=None,
                detail="",
            )
        elif isinstance(event, CheckRecorded) and event.check_job_id in checks:
            checks[event.check_job_id] = checks[event.check_job_id].model_copy(
                update={
                    "recorded_at": event.occurred_at,
                    "status": event.status,
                    "http_status": event.http_status,
                    "change": event.change,
                    "detail": event.detail,
                }
            )
    return list(reversed(checks.values()))


def change_views(events: Iterable[Event]) -> list[ChangeView]:
    """Each change a monitor found, newest first."""
    return [
        ChangeView(
            check_job_id=event.check_job_id,
            detected_at=event.occurred_at,
            kind=event.kind,
            diff=event.diff,
            diff_truncated=event.diff_truncated,
            word_diff=event.word_diff,
            lines_added=event.lines_added,
            lines_removed=event.lines_removed,
            fingerprint=event.fingerprint,
            previous_artifact=None
            if event.previous_artifact is None
            else artifact_view(event.previous_artifact),
            current_artifact=None
            if event.current_artifact is None
            else artifact_view(event.current_artifact),
            offer=None if event.offer is None else offer_change_view(event.offer),
            visual=None
            if event.visual is None
            else _visual_view(event.job_id, event.check_job_id, event.visual),
        )
        for event in reversed(list(events))
        if isinstance(event, ChangeDetected)
    ]


def newest_views(
    recent: Sequence[V],
    older: Iterable[V],
    at: Callable[[V], datetime | None],
    until: datetime | None,
    limit: int,
) -> list[V]:
    """Up to `limit` views, newest first: those of the kept events, then the older ones the store lists
    (only those that had happened by `until`, when given)."""
    earlier = older if until is None else (view for view in older if (at(view) or until) <= until)
    return list(itertools.islice(itertools.chain(recent, earlier), limit))


def feed_entries(
    monitor: Monitor, events: Iterable[Event], older: Iterable[ChangeView], limit: int
) -> list[FeedEntry]:
    """A monitor's newest `limit` changes as feed entries, newest first."""
    changes = newest_views(change_views(events), older, lambda view: view.detected_at, None, limit)
    url, name = shown_url(monitor.spec.request.url), monitor.created.name
    return [FeedEntry(monitor_id=monitor.monitor_id, name=name, url=url, change=change) for change in changes]


def offer_change_view(change: OfferChange) -> OfferChangeView:
    return OfferChangeView(
        kinds=list(change.kinds), previous=_offer_view(change.previous), current=_offer_view(change.current)
    )


def _offer_view(offer: Offer | None) -> OfferView | None:
    if offer is None:
        return None
    return OfferView(amount=offer.amount, currency=offer.currency, availability=offer.availability)


def _visual_view(monitor_id: UUID, check_job_id: UUID, visual: VisualDifference) -> VisualView:
    difference = visual.difference
    return VisualView(
        ratio=visual.ratio,
        threshold=visual.threshold,
        difference=None
        if difference is None
        else artifact_view(difference).model_copy(
            update={"download_path": difference_path(monitor_id, check_job_id)}
        ),
    )


def difference_path(monitor_id: UUID, check_job_id: UUID) -> str:
    """The API path of a visual change's difference image."""
    return f"/monitors/{monitor_id}/changes/{check_job_id}/difference"
