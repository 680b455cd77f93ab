"""Bodies of the monitor routes: a monitor to create, and the fields an edit replaces."""

from __future__ import annotations

import re
from typing import Any

import msgspec
from pydantic import BaseModel, ConfigDict, Field, field_validator

from projections.lifecycle.limits import MAX_REASON_BYTES
from projections.monitor_views import schedule_view
from projections.monitors.patterns import MAX_PATTERNS
from projections.monitors.selection import MAX_SELECT_CHARS
from schemas.enums import CaptureMode, HttpMethod, PolicyClass, TransportPolicy
from schemas.records import (
    ALL_WEEKDAYS,
    MonitorSchedule,
    MonitorSpec,
    MonitorWindow,
    RenderOptions,
    Request,
)
from streams.web.models import AvroInt, RenderBody

_SPEC = {field.name: field for field in msgspec.structs.fields(MonitorSpec)}
_CLOCK = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")
MAX_SELECTORS = 20


class WindowBody(BaseModel):
    """When checks may run, in the schedule's time zone; an end before the start spans midnight."""

    model_config = ConfigDict(extra="forbid")

    start: str = Field(description="HH:MM")
    end: str = Field(description="HH:MM")
    weekdays: list[int] = Field(default=list(ALL_WEEKDAYS), max_length=7, description="0 Monday to 6 Sunday")

    @field_validator("start", "end")
    @classmethod
    def _clock(cls, value: str) -> str:
        if _CLOCK.fullmatch(value) is None:
            raise ValueError("a time of day is HH:MM, from 00:00 to 23:59")
        return value

    def window(self) -> MonitorWindow:
        return MonitorWindow(
            start_minute=_minutes(self.start), end_minute=_minutes(self.end), weekdays=tuple(self.weekdays)
        )


class MonitorOptions(BaseModel):
    """What a monitor checks, when, and what counts: every field an edit may replace."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="The page: an absolute http(s) URL")
    method: HttpMethod = HttpMethod.GET
    headers: dict[str, str] = Field(default_factory=dict, description="Allowed request headers")
    every_s: AvroInt | None = Field(default=None, description="Seconds between checks (10 to 31,622,400)")
    cron: str | None = Field(default=None, max_length=120, description="Or a cron expression, in time_zone")
    time_zone: str = Field(default="UTC", max_length=64)
    jitter_s: AvroInt = Field(
        default=0, description="Checks run later by a fixed share of this, the monitor's own"
    )
    window: WindowBody | None = None
    job_type: str = _SPEC["job_type"].default
    policy_class: PolicyClass = _SPEC["policy_class"].default
    capture_mode: CaptureMode = _SPEC["capture_mode"].default
    transport_policy: TransportPolicy = _SPEC["transport_policy"].default
    render: RenderBody | None = None
    credential: str | None = Field(default=None, max_length=64)
    callback_url: str | None = Field(default=None, description="Each change is POSTed here, signed")
    conditional: bool = Field(default=True, description="Ask with the last copy's ETag / Last-Modified")
    watch: list[str] = Field(default_factory=list, max_length=MAX_SELECTORS, description="Only these count")
    ignore: list[str] = Field(default_factory=list, max_length=MAX_SELECTORS, description="These never count")
    select: str | None = Field(
        default=None, max_length=MAX_SELECT_CHARS, description="JMESPath: of a JSON document only this counts"
    )
    trigger: list[str] = Field(
        default_factory=list,
        max_length=MAX_PATTERNS,
        description="Announce only when a changed line matches one",
    )
    drop: list[str] = Field(
        default_factory=list, max_length=MAX_PATTERNS, description="Lines these match never count"
    )
    insensitive: bool = Field(default=False, description="Case and whitespace never count")
    visual_threshold: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description="Compare screenshots (job_type browser.render, capture_mode SCREENSHOT): a change "
        "when more than this share of pixels changed",
    )
    product: bool = Field(
        default=False, description="Compare the page's schema.org offer (price, stock), announced typed"
    )
    labels: dict[str, str] = Field(default_factory=dict)

    def spec(self) -> MonitorSpec:
        return MonitorSpec(
            request=Request(url=self.url, method=self.method, headers=self.headers),
            schedule=MonitorSchedule(
                every_s=self.every_s,
                cron=self.cron,
                time_zone=self.time_zone,
                jitter_s=self.jitter_s,
                window=None if self.window is None else self.window.window(),
            ),
            job_type=self.job_type,
            policy_class=self.policy_class,
            capture_mode=self.capture_mode,
            transport_policy=self.transport_policy,
            render=None if self.render is None else RenderOptions(**self.render.model_dump()),
            credential=self.credential,
            callback_url=self.callback_url,
            conditional=self.conditional,
            watch=tuple(self.watch),
            ignore=tuple(self.ignore),
            labels=self.labels,
            select=self.select,
            trigger=tuple(self.trigger),
            drop=tuple(self.drop),
            insensitive=self.insensitive,
            product=self.product,
            visual_threshold=self.visual_threshold,
        )


class MonitorBody(MonitorOptions):
    """A monitor to create: its name (one monitor per name and caller) and its options."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"name": "pricing", "url": "https://example.com/pricing", "every_s": 3600, "ignore": [".ad"]},
                {
                    "name": "status",
                    "url": "https://example.com/status",
                    "cron": "*/15 9-17 * * 1-5",
                    "time_zone": "Europe/Berlin",
                    "watch": ["main"],
                    "callback_url": "https://hooks.example.com/changes",
                },
            ]
        },
    )

    name: str = Field(min_length=1, max_length=200)
    caller_identity: str | None = Field(default=None, description="Whose monitor it is; default: yours")


class SwitchBody(BaseModel):
    """Why a monitor is paused or resumed (optional), kept in its history."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=MAX_REASON_BYTES)


def edited(spec: MonitorSpec, changes: dict[str, Any]) -> MonitorSpec:
    """`spec` with the options `changes` names replaced (a PATCH body's), checked as a whole."""
    return MonitorOptions.model_validate(options_of(spec) | changes).spec()


def options_of(spec: MonitorSpec) -> dict[str, Any]:
    """A spec as the options a body gives."""
    schedule = schedule_view(spec.schedule)
    return {
        "url": spec.request.url,
        "method": spec.request.method,
        "headers": spec.request.headers,
        "every_s": schedule.every_s,
        "cron": schedule.cron,
        "time_zone": schedule.time_zone,
        "jitter_s": schedule.jitter_s,
        "window": None if schedule.window is None else schedule.window.model_dump(),
        "job_type": spec.job_type,
        "policy_class": spec.policy_class,
        "capture_mode": spec.capture_mode,
        "transport_policy": spec.transport_policy,
        "render": None if spec.render is None else msgspec.to_builtins(spec.render),
        "credential": spec.credential,
        "callback_url": spec.callback_url,
        "conditional": spec.conditional,
        "watch": list(spec.watch),
        "ignore": list(spec.ignore),
        "select": spec.select,
        "trigger": list(spec.trigger),
        "drop": list(spec.drop),
        "insensitive": spec.insensitive,
        "product": spec.product,
        "visual_threshold": spec.visual_threshold,
        "labels": spec.labels,
    }


def _minutes(clock: str) -> int:
    hours, minutes = clock.split(":")
    return int(hours) * 60 + int(minutes)
