"""Events: immutable past-tense facts on scrapestream.events, plus the public JobCompleted."""

from uuid import UUID

from msgspec import field

from schemas.enums import (
    ActorRole,
    ArtifactTrust,
    AuditAction,
    AuditOutcome,
    CacheMode,
    CaptureMode,
    ChangeKind,
    ExpiryReason,
    JobStatus,
    PolicyClass,
    RejectionReason,
    ReportKind,
    RetentionClass,
    TransportPolicy,
)
from schemas.records import (
    Artifact,
    Attempt,
    Failure,
    MonitorSpec,
    OfferChange,
    RenderOptions,
    Request,
    VisualDifference,
)
from schemas.types import Instant, Record


class EventEnvelope(Record, frozen=True, kw_only=True):
    event_id: UUID
    job_id: UUID
    sequence: int
    occurred_at: Instant
    command_id: UUID


class JobAccepted(EventEnvelope, frozen=True, kw_only=True):
    caller_identity: str
    request: Request
    job_type: str
    policy_class: PolicyClass
    cache_mode: CacheMode
    capture_mode: CaptureMode
    retention_class: RetentionClass
    transport_policy: TransportPolicy
    deadline_at: Instant
    callback_url: str | None
    labels: dict[str, str] = field(default_factory=dict)
    idempotency_key: str
    attempt_limit: int
    request_hash: str
    max_runtime_ms: int
    render: RenderOptions | None = None
    credential: str | None = None
    first_lease_expires_at: Instant | None = None
    traceparent: str | None = None
    tracestate: str | None = None
    request_id: str = ""


class JobRejected(EventEnvelope, frozen=True, kw_only=True):
    caller_identity: str
    idempotency_key: str
    reason: RejectionReason
    detail: str
    job_type: str = ""
    url: str = ""
    callback_url: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    submitted_by: str | None = None


class SubmissionReused(EventEnvelope, frozen=True, kw_only=True):
    caller_identity: str


class JobDispatched(EventEnvelope, frozen=True, kw_only=True):
    attempt_number: int
    lease_id: UUID
    lease_expires_at: Instant


class LeaseRenewed(EventEnvelope, frozen=True, kw_only=True):
    attempt_number: int
    lease_id: UUID
    lease_expires_at: Instant


class AttemptStarted(EventEnvelope, frozen=True, kw_only=True):
    attempt_number: int
    lease_id: UUID
    lease_expires_at: Instant


class AttemptRecorded(EventEnvelope, frozen=True, kw_only=True):
    attempt: Attempt


class StaleReportIgnored(EventEnvelope, frozen=True, kw_only=True):
    kind: ReportKind
    attempt_number: int
    lease_id: UUID
    reason: str


class RetryScheduled(EventEnvelope, frozen=True, kw_only=True):
    attempt_number: int
    next_attempt_at: Instant
    failure: Failure


class LeaseExpired(EventEnvelope, frozen=True, kw_only=True):
    attempt_number: int
    lease_id: UUID
    lease_expires_at: Instant
    reason: ExpiryReason
    failure: Failure


class JobSucceeded(EventEnvelope, frozen=True, kw_only=True):
    attempt_number: int
    artifacts: tuple[Artifact, ...] = ()
    attempt: Attempt | None = None  # the successful attempt's record, held since schema version 24


class JobDeadLettered(EventEnvelope, frozen=True, kw_only=True):
    failure: Failure


class JobCancelled(EventEnvelope, frozen=True, kw_only=True):
    actor_id: str
    actor_role: ActorRole
    reason: str


class CallbackDispatched(EventEnvelope, frozen=True, kw_only=True):
    webhook_id: str
    attempt_number: int


class CallbackRetryScheduled(EventEnvelope, frozen=True, kw_only=True):
    webhook_id: str
    attempt_number: int
    next_attempt_at: Instant
    last_error: str
    http_status: int | None = None


class CallbackDelivered(EventEnvelope, frozen=True, kw_only=True):
    callback_url: str
    delivery_attempts: int
    http_status: int
    webhook_id: str = ""


class CallbackAbandoned(EventEnvelope, frozen=True, kw_only=True):
    callback_url: str
    delivery_attempts: int
    last_error: str
    webhook_id: str = ""
    http_status: int | None = None


class AuditRecorded(EventEnvelope, frozen=True, kw_only=True):
    audit_id: UUID
    actor_id: str
    actor_role: ActorRole
    action: AuditAction
    outcome: AuditOutcome
    reason: str
    detail: str
    request_id: str
    target: str = ""
    refusal: str = ""


class JobRedriven(EventEnvelope, frozen=True, kw_only=True):
    actor_id: str
    actor_role: ActorRole
    reason: str
    deadline_at: Instant
    budget_spent_before: int
    cache_mode: CacheMode | None = None


class JobHistoryDeleted(EventEnvelope, frozen=True, kw_only=True):
    actor_id: str
    actor_role: ActorRole
    reason: str


class CallbackReplayed(EventEnvelope, frozen=True, kw_only=True):
    actor_id: str
    actor_role: ActorRole
    reason: str
    webhook_id: str
    callback_url: str


class AuditRecordsPurged(EventEnvelope, frozen=True, kw_only=True):
    before: Instant
    actor_id: str
    actor_role: ActorRole
    reason: str


class MonitorCreated(EventEnvelope, frozen=True, kw_only=True):
    caller_identity: str
    name: str
    spec: MonitorSpec
    actor_id: str
    actor_role: ActorRole
    next_due_at: Instant | None = None


class MonitorRefused(EventEnvelope, frozen=True, kw_only=True):
    command: str
    reason: str
    detail: str


class MonitorEdited(EventEnvelope, frozen=True, kw_only=True):
    spec: MonitorSpec
    actor_id: str
    actor_role: ActorRole
    rebased: bool = False
    next_due_at: Instant | None = None


class MonitorPaused(EventEnvelope, frozen=True, kw_only=True):
    actor_id: str
    actor_role: ActorRole
    reason: str = ""


class MonitorResumed(EventEnvelope, frozen=True, kw_only=True):
    actor_id: str
    actor_role: ActorRole
    reason: str = ""
    next_due_at: Instant | None = None


class MonitorDeleted(EventEnvelope, frozen=True, kw_only=True):
    actor_id: str
    actor_role: ActorRole
    reason: str = ""


class CheckScheduled(EventEnvelope, frozen=True, kw_only=True):
    check_job_id: UUID
    due_at: Instant
    missed: int = 0


class CheckFetched(EventEnvelope, frozen=True, kw_only=True):
    check_job_id: UUID
    artifact: Artifact
    http_status: int | None = None


class CheckRecorded(EventEnvelope, frozen=True, kw_only=True):
    check_job_id: UUID
    due_at: Instant
    status: JobStatus
    http_status: int | None = None
    change: ChangeKind | None = None
    fingerprint: str | None = None
    artifact: Artifact | None = None
    detail: str = ""
    next_due_at: Instant | None = None


class ChangeDetected(EventEnvelope, frozen=True, kw_only=True):
    check_job_id: UUID
    kind: ChangeKind
    previous_artifact: Artifact | None = None
    current_artifact: Artifact | None = None
    fingerprint: str | None = None
    diff: str = ""
    diff_truncated: bool = False
    lines_added: int = 0
    lines_removed: int = 0
    word_diff: str = ""
    offer: OfferChange | None = None
    visual: VisualDifference | None = None


MonitorEvent = (
    MonitorCreated
    | MonitorRefused
    | MonitorEdited
    | MonitorPaused
    | MonitorResumed
    | MonitorDeleted
    | CheckScheduled
    | CheckFetched
    | CheckRecorded
    | ChangeDetected
)


Event = (
    JobAccepted
    | JobRejected
    | SubmissionReused
    | JobDispatched
    | LeaseRenewed
    | AttemptStarted
    | AttemptRecorded
    | StaleReportIgnored
    | RetryScheduled
    | LeaseExpired
    | JobSucceeded
    | JobDeadLettered
    | JobCancelled
    | CallbackDispatched
    | CallbackRetryScheduled
    | CallbackDelivered
    | CallbackAbandoned
    | AuditRecorded
    | JobRedriven
    | JobHistoryDeleted
    | AuditRecordsPurged
    | CallbackReplayed
    | MonitorEvent
)


class JobCompleted(Record, frozen=True, kw_only=True):
    job_id: UUID
    caller_identity: str
    idempotency_key: str
    job_type: str
    url: str
    status: JobStatus
    attempt_count: int
    artifacts: tuple[Artifact, ...] = ()
    failure: Failure | None = None
    completed_at: Instant
    labels: dict[str, str] = field(default_factory=dict)
    artifacts_trust: ArtifactTrust = ArtifactTrust.VERIFIED
    from_cache: bool = False
    cached_at: Instant | None = None
