"""Bodies of the API's own routes (health, readiness, mutations); job read models are `projections.views`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from projections.lifecycle.limits import MAX_REASON_BYTES
from projections.lifecycle.monitors import reserved_key_problem
from projections.views import AuditView
from schemas.commands import SubmitJob
from schemas.enums import (
    CacheMode,
    CaptureMode,
    HttpMethod,
    JobStatus,
    PolicyClass,
    RetentionClass,
    TransportPolicy,
)
from schemas.records import RenderOptions, Request
from streams.clock import utc_now
from streams.moments import as_utc

_RENDER = {field.name: field for field in msgspec.structs.fields(RenderOptions)}
_SUBMIT = {field.name: field for field in msgspec.structs.fields(SubmitJob)}


class Health(BaseModel):
    status: Literal["ok"]
    owned_partitions: list[int] = Field(description="Commands partitions this worker keeps and decides")
    counters: dict[str, int]


class JobTypeInfo(BaseModel):
    name: str
    label: str
    max_runtime_ms: int = Field(description="The resolved profile: what the type declared, or the default")
    max_attempts: int
    declared: bool = Field(
        description="Whether the profile is the type's own (false: the deployment default)"
    )
    runs_here: bool = Field(
        description="Whether this worker's executor reads the type's work; a submission of a type no "
        "running worker reads is rejected UNSUPPORTED_JOB_TYPE"
    )
    not_run_here_because: str | None = Field(
        default=None, description="Why this worker does not run it (what to install or set), if it does not"
    )
    enabled: bool = Field(
        default=True,
        description="False once an operator switched it off: submissions rejected, queued work waiting",
    )
    control: str | None = Field(
        default=None, description="The last switch off or on: who, when and why, as the operator said"
    )


class JobTypeList(BaseModel):
    items: list[JobTypeInfo]


class PeriodSpend(BaseModel):
    starts_at: datetime
    spent: str = Field(
        description="Decimal: reservations granted in the period, at their actual cost once known"
    )


class RouteInfo(BaseModel):
    name: str
    kind: Literal["direct", "proxy", "browser"]
    trust: str
    enabled: bool
    metered: bool = Field(
        description="Whether calls are reserved on the route's ledger (priced, budgeted or rate-limited)"
    )
    price_per_gb: str
    price_per_browser_second: str
    budget: str | None = Field(description="Decimal budget per period; null: unbounded")
    period_s: int
    requests_per_s: float = Field(description="The route's request-rate limit; 0: none")
    spent_in_period: str = Field(description="Decimal spend of the current period")
    remaining: str | None = Field(description="Decimal budget left in the current period; null: unbounded")
    spent_total: str = Field(description="Decimal spend over every period this worker has read")
    rate: int = Field(description="Reservations granted within the last second")
    granted: int
    denied: int
    reservations_outstanding: int = Field(
        description="Granted reservations not yet reconciled: calls under way, or whose report is due"
    )
    periods: list[PeriodSpend] = Field(description="Spend of the most recent periods, oldest first")


class RouteList(BaseModel):
    items: list[RouteInfo]


class Readiness(BaseModel):
    ready: bool
    broker_reachable: bool
    assigned_partitions: list[int] = Field(description="Commands partitions the group gave this worker")
    catching_up: list[int] = Field(description="Partitions whose store is still folding the events log")
    reasons: list[str] = Field(description="Why the worker is not ready; empty when it is")


def _in_utc(value: datetime) -> datetime:
    try:
        return as_utc(value).astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("not an instant UTC can hold") from exc


UtcInstant = Annotated[datetime, AfterValidator(_in_utc)]


class MutationBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(min_length=1, max_length=MAX_REASON_BYTES, description="Recorded in the audit trail")


class RedriveBody(MutationBody):
    deadline_at: UtcInstant | None = Field(
        default=None, description="A new deadline; needed when the job's own has passed (UTC unless it says)"
    )
    cache_mode: CacheMode | None = Field(
        default=None, description="How the response cache may answer the redriven job; BYPASS unless given"
    )


class ReplayBody(MutationBody):
    callback_url: str | None = Field(
        default=None, max_length=2048, description="Deliver here instead of the job's own callback URL"
    )


class BulkReplayBody(ReplayBody):
    since: UtcInstant = Field(description="Jobs accepted at or after this time (UTC unless it says)")
    until: UtcInstant | None = Field(default=None, description="Jobs accepted at or before this time")
    caller: str | None = Field(default=None, max_length=256, description="Only this caller's jobs")
    states: list[JobStatus] = Field(
        default_factory=lambda: [JobStatus.SUCCEEDED, JobStatus.DEAD_LETTER, JobStatus.CANCELLED],
        description="Only jobs that ended so",
    )
    dry_run: bool = Field(default=False, description="Say which callbacks would be replayed, replay none")
    limit: int = Field(default=1_000, ge=1, le=10_000, description="At most this many jobs")
    per_receiver_per_s: float = Field(
        default=20.0, gt=0, le=1_000, description="Replays a second per receiver"
    )


class BulkReplayResult(BaseModel):
    matched: int = Field(description="Finished jobs of the selection")
    replayed: list[UUID] = Field(description="Jobs whose callback replay was sent (each decided and audited)")
    skipped: list[UUID] = Field(description="Jobs with no callback to replay (none set, none given)")
    still_delivering: list[UUID] = Field(
        default_factory=list,
        description="Jobs whose callback is still being delivered: not replayed (the lifecycle would refuse)",
    )
    dry_run: bool


class MutationResult(BaseModel):
    outcome: Literal["ALLOWED", "PENDING"] = Field(
        description="ALLOWED once decided; PENDING when the decision was not seen in time (it still happens)"
    )
    command_id: UUID
    audit: AuditView | None


class ShardPage(BaseModel):
    """A worker's page of a listing over the partitions it keeps (internal: worker to worker)."""

    partitions: list[int]
    items: list[tuple[str, Any]]
    resume_after: str | None


class ArtifactReference(BaseModel):
    """A job that stored an artifact (internal: worker to worker)."""

    job_id: UUID
    caller: str
    key: str
    content_type: str


class ArtifactReferences(BaseModel):
    references: list[ArtifactReference]


# What a record's fields can carry: a body beyond is a 400, not a record that cannot be written.
AvroInt = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
MAX_DEADLINE_S = 100 * 365 * 86_400


class RenderBody(BaseModel):
    """How a browser job renders its page: the fields of `RenderOptions`."""

    model_config = ConfigDict(extra="forbid", title="RenderOptions")

    wait_until: str = _RENDER["wait_until"].default
    wait_selector: str | None = None
    viewport_width: AvroInt = _RENDER["viewport_width"].default
    viewport_height: AvroInt = _RENDER["viewport_height"].default
    full_page: bool = _RENDER["full_page"].default


def _unreserved(key: str | None) -> str | None:
    problem = reserved_key_problem(key)
    if problem is not None:
        raise ValueError(problem)
    return key


class SubmitBody(BaseModel):
    """A job to submit: the fields of a `SubmitJob`. Who submits is the authenticated principal."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"caller_identity": "svc-a", "url": "https://example.com/", "deadline_s": 3600},
                {
                    "caller_identity": "svc-a",
                    "url": "https://example.com/",
                    "job_type": "browser.render",
                    "capture_mode": "SCREENSHOT",
                    "render": {"wait_selector": "main", "viewport_width": 1280, "viewport_height": 720},
                    "callback_url": "https://hooks.example.com/scrapes",
                },
            ]
        },
    )
    caller_identity: str = Field(description="Whose job it is; a SERVICE may submit only as itself")
    url: str = Field(description="The page: an absolute http(s) URL")
    method: HttpMethod = HttpMethod.GET
    headers: dict[str, str] = Field(default_factory=dict, description="Allowed request headers")
    idempotency_key: Annotated[str | None, AfterValidator(_unreserved)] = Field(
        default=None,
        description="Default: a hash of the request and every option that changes its output; keys starting "
        "`scrapestream.monitor:` are reserved for monitor checks",
    )
    # The options' defaults are the submission record's own: one place for each.
    job_type: str = _SUBMIT["job_type"].default
    policy_class: PolicyClass = _SUBMIT["policy_class"].default
    cache_mode: CacheMode = _SUBMIT["cache_mode"].default
    capture_mode: CaptureMode = _SUBMIT["capture_mode"].default
    retention_class: RetentionClass = _SUBMIT["retention_class"].default
    transport_policy: TransportPolicy = _SUBMIT["transport_policy"].default
    deadline_s: float = Field(
        default=3600.0, gt=0, le=MAX_DEADLINE_S, description="The job's deadline, in seconds from now"
    )
    attempt_limit: AvroInt | None = None
    callback_url: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    render: RenderBody | None = None
    credential: str | None = Field(
        default=None,
        max_length=64,
        description="The name of a credential the deployment holds (SCRAPESTREAM_CREDENTIALS), not its value",
    )

    def command(self, **envelope: Any) -> SubmitJob:
        """The `SubmitJob` this body asks for, its deadline counted from now; `envelope` sets who
        sends it (command id, submitter)."""
        fields = self.model_dump(exclude={"url", "method", "headers", "deadline_s", "render"})
        return SubmitJob(
            request=Request(url=self.url, method=self.method, headers=self.headers),
            render=None if self.render is None else RenderOptions(**self.render.model_dump()),
            deadline_at=utc_now() + timedelta(seconds=self.deadline_s),
            **fields,
            **envelope,
        )


class SubmissionResult(BaseModel):
    job_id: UUID = Field(description="The job the submission names (read it at /jobs/{job_id})")
    submission: Literal["created", "reused", "rejected", "pending"] = Field(
        description="What the submission did; pending when it was not decided in time (it still will be)"
    )
    reason: str | None = Field(default=None, description="For a rejected submission: the rejection reason")
    detail: str | None = Field(default=None, description="For a rejected submission: why, in words")


class Chart(BaseModel):
    """A time series: `x` in Unix seconds, one list in `y` per label."""

    labels: list[str]
    x: list[int]
    y: list[list[float]]
    unit: str


class HostLoad(BaseModel):
    host: str
    jobs: int = Field(description="Jobs on this host accepted in the last hour (of those read)")
    active: int = Field(description="Of them, those still to run or running")


class Cluster(BaseModel):
    """What every worker reports (viewers, operators and admins only)."""

    jobs: dict[str, int] = Field(description="Jobs per state, summed over every worker")
    lag: dict[str, int] = Field(description="Records not yet consumed, per topic, over every worker")
    behind: list[str] = Field(description="Topics at least 1,000 records behind")
    workers: dict[str, list[int]] = Field(description="Each worker's URL and the commands partitions it has")
    unowned: list[int] = Field(description="Commands partitions no worker keeps")
    unowned_elsewhere: dict[str, list[int]] = Field(description="Other topics' partitions no worker holds")
    processes: list[ProcessView] = Field(
        default_factory=list, description="The processes of the worker that answered (`GET /processes`)"
    )


class ProcessView(BaseModel):
    index: int = Field(description="Its place among the worker's processes, from 0")
    pid: int | None = Field(description="Its process id; null while it is being restarted")
    state: Literal["starting", "serving", "restarting", "stopped"]
    url: str | None = Field(description="The address it serves on (its own port)")
    started_at: datetime | None
    restarts: int = Field(description="Times the worker restarted it since the worker started")
    last_exit: str | None = Field(description="How it last ended, and after how long, if it ever did")
    resident_bytes: int | None = Field(description="Its resident memory")


class Processes(BaseModel):
    processes: list[ProcessView]


class Overview(BaseModel):
    at: datetime
    states: dict[str, int]
    states_of: str = Field(description="Whose jobs `states` counts: every job, or the caller's recent ones")
    recent_jobs: int = Field(description="Jobs accepted in the last hour that these figures are from")
    recent_limit: int = Field(
        description="The most recent jobs read: when `recent_jobs` reaches it, the last hour's figures are "
        "of the newest `recent_limit` jobs only"
    )
    completed_last_minute: int | None = Field(
        description="Jobs that ended in the last 60 s, when every job of the last hour was read (else null)"
    )
    outcomes: dict[str, int] = Field(description="Of the recent jobs, how many ended each way")
    latency_ms: dict[str, float] | None = Field(description="Submit→completion p50, p90, p99 of those")
    completions: Chart = Field(description="Completions per second by outcome, per minute of the hour")
    hosts: list[HostLoad]
    cluster: Cluster | None = Field(description="Cluster-wide figures, for readers of every job")


class CacheEntryView(BaseModel):
    http_status: int
    stored_at: datetime
    expires_at: datetime
    job_id: UUID = Field(description="The job whose response the entry holds")
    must_revalidate: bool
    etag: str | None
    last_modified: str | None


class CacheAnswer(BaseModel):
    url: str
    request_hash: str
    at: datetime
    answered_from_cache: bool = Field(description="Whether a REUSE_VALID job then is answered by the entry")
    why: str
    entry: CacheEntryView | None
