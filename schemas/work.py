"""Records the lifecycle hands to the shell: due work, callbacks to deliver, answers, dead input."""

from uuid import UUID

from msgspec import field

from schemas.enums import (
    ActorRole,
    AnswerKind,
    CacheMode,
    CaptureMode,
    ChangeKind,
    JobStatus,
    PolicyClass,
    RejectionReason,
    RetentionClass,
    TransportPolicy,
)
from schemas.events import CheckScheduled, JobCompleted, MonitorCreated
from schemas.records import Artifact, MonitorSpec, OfferChange, RenderOptions, Request, VisualDifference
from schemas.types import Instant, Money, Record


class DueWork(Record, frozen=True, kw_only=True):
    job_id: UUID
    attempt_number: int
    lease_id: UUID
    lease_expires_at: Instant
    renew_interval_ms: int
    max_runtime_ms: int
    job_type: str
    request: Request
    policy_class: PolicyClass
    cache_mode: CacheMode
    capture_mode: CaptureMode
    retention_class: RetentionClass
    transport_policy: TransportPolicy
    deadline_at: Instant
    start_by: Instant | None = None
    request_hash: str = ""
    render: RenderOptions | None = None
    avoid_routes: tuple[str, ...] = ()
    credential: str | None = None
    upload_url: str | None = None
    upload_key: str | None = None
    caller_identity: str = ""


class CacheEntry(Record, frozen=True, kw_only=True):
    request_hash: str
    http_status: int
    artifacts: tuple[Artifact, ...] = ()
    etag: str | None = None
    last_modified: str | None = None
    stored_at: Instant
    expires_at: Instant
    job_id: UUID
    must_revalidate: bool = False
    wire_bytes: int = 0


class MonitorChange(Record, frozen=True, kw_only=True):
    monitor_id: UUID
    caller_identity: str
    name: str
    url: str
    check_job_id: UUID
    detected_at: Instant
    kind: ChangeKind
    previous_artifact: Artifact | None = None
    current_artifact: Artifact | None = None
    fingerprint: str | None = None
    diff: str = ""
    diff_truncated: bool = False
    lines_added: int = 0
    lines_removed: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    word_diff: str = ""
    offer: OfferChange | None = None
    visual: VisualDifference | None = None


class CallbackDue(Record, frozen=True, kw_only=True):
    job_id: UUID
    callback_url: str
    webhook_id: str
    completion: JobCompleted | None = None
    attempt_number: int = 1
    replay: int = 0
    change: MonitorChange | None = None


class DeadInput(Record, frozen=True, kw_only=True):
    source_topic: str
    partition: int
    offset: int
    key: bytes | None = None
    value: bytes
    reason: str
    received_at: Instant


class SubmissionAnswer(Record, frozen=True, kw_only=True):
    answer: AnswerKind
    source_partition: int
    source_offset: int
    correlation_id: str | None = None
    command_id: UUID | None = None
    command_type: str | None = None
    job_id: UUID | None = None
    job_status: JobStatus | None = None
    rejection: RejectionReason | None = None
    reason: str | None = None
    answered_at: Instant
    principal: str | None = None


class LeaseRevoked(Record, frozen=True, kw_only=True):
    job_id: UUID
    attempt_number: int
    lease_id: UUID
    reason: str


class ArtifactReference(Record, frozen=True, kw_only=True):
    artifact_key: str
    job_id: UUID
    expires_at: Instant | None = None


class ArtifactPurged(Record, frozen=True, kw_only=True):
    artifact_key: str
    written_before: Instant
    reason: str
    purged_at: Instant


class JobSnapshot(Record, frozen=True, kw_only=True):
    job_id: UUID
    events_offset: int
    events: tuple[bytes, ...]
    part: int = 0
    parts: int = 1


class CallbackInFlight(Record, frozen=True, kw_only=True):
    due: CallbackDue
    first_dispatched_at: Instant
    attempt_number: int
    dispatched_at: Instant | None = None
    next_attempt_at: Instant | None = None
    last_error: str = ""


class MonitorCheckpoint(Record, frozen=True, kw_only=True):
    created: MonitorCreated
    spec: MonitorSpec
    sequence: int
    folded_at: Instant
    next_due_at: Instant | None = None
    paused: bool = False
    deleted: bool = False
    last_due_at: Instant | None = None
    pending: CheckScheduled | None = None
    fetched: Artifact | None = None
    fetched_status: int | None = None
    fingerprint: str | None = None
    artifact: Artifact | None = None
    gone: bool = False
    checks: int = 0
    changes: int = 0
    missed: int = 0
    last_change: MonitorChange | None = None
    last_change_webhook_id: str | None = None
    callback_replays: int = 0
    callbacks: tuple[CallbackInFlight, ...] = ()
    callbacks_finished: int = 0
    recent_command_ids: tuple[UUID, ...] = ()
    recent_command_at: tuple[Instant, ...] = ()
    pause_reason: str = ""


class SnapshotMark(Record, frozen=True, kw_only=True):
    partition: int
    events_offset: int


class RouteReserved(Record, frozen=True, kw_only=True):
    reservation_id: UUID
    route: str
    job_id: UUID
    attempt_number: int
    estimated: Money
    requested_at: Instant


class RouteReconciled(Record, frozen=True, kw_only=True):
    reservation_id: UUID
    route: str
    actual: Money
    bytes: int
    browser_seconds: Money
    reconciled_at: Instant


class RoutePeriodSpend(Record, frozen=True, kw_only=True):
    period: int
    spent: Money


class RouteHold(Record, frozen=True, kw_only=True):
    reservation_id: UUID
    period: int
    amount: Money


class RouteDecision(Record, frozen=True, kw_only=True):
    reservation_id: UUID
    granted: bool
    code: str | None = None
    retry_at: Instant | None = None


class RouteCheckpoint(Record, frozen=True, kw_only=True):
    route: str
    through_offset: int
    period_s: int
    spent_total: Money
    granted: int
    denied: int
    periods: tuple[RoutePeriodSpend, ...] = ()
    held: tuple[RouteHold, ...] = ()
    grant_times: tuple[Instant, ...] = ()
    decisions: tuple[RouteDecision, ...] = ()
    written_at: Instant


class JobTypeControl(Record, frozen=True, kw_only=True):
    job_type: str
    enabled: bool
    reason: str
    actor_id: str
    actor_role: ActorRole
    changed_at: Instant


class ExecutorAnnouncement(Record, frozen=True, kw_only=True):
    worker: str
    runs: tuple[str, ...]
    cannot_run: dict[str, str]
    announced_at: Instant
    expires_at: Instant


class ReadCheck(Record, frozen=True, kw_only=True):
    monitor_id: UUID
    check_job_id: UUID
    artifact: Artifact
    previous: Artifact | None = None
    watch: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    select: str | None = None
    trigger: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    insensitive: bool = False
    product: bool = False
    visual_threshold: float | None = None
