"""Commands: imperative requests to the lifecycle. SubmitJob, CancelJob, RedriveJob,
DeleteJobHistory and ReplayCallback are public input; RecordAudit comes from the workers' HTTP API."""

from uuid import UUID

from msgspec import field

from schemas.enums import (
    ActorRole,
    AttemptOutcome,
    AuditAction,
    AuditOutcome,
    CacheMode,
    CaptureMode,
    JobStatus,
    PolicyClass,
    ReportKind,
    RetentionClass,
    TransportPolicy,
)
from schemas.records import Artifact, Attempt, MonitorSpec, Offer, RenderOptions, Request, VisualDifference
from schemas.types import Instant, Record


class SubmitJob(Record, frozen=True, kw_only=True):
    command_id: UUID | None = None
    caller_identity: str
    idempotency_key: str | None = None
    request: Request
    job_type: str = "http.fetch"
    policy_class: PolicyClass = PolicyClass.STANDARD
    cache_mode: CacheMode = CacheMode.REUSE_VALID
    capture_mode: CaptureMode = CaptureMode.RAW_BODY
    retention_class: RetentionClass = RetentionClass.CACHE_7D
    transport_policy: TransportPolicy = TransportPolicy.DIRECT_ONLY
    deadline_at: Instant
    attempt_limit: int | None = None
    callback_url: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    submitted_by: str | None = None
    submitter_role: ActorRole | None = None
    render: RenderOptions | None = None
    expires_at: Instant | None = None
    credential: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None
    request_id: str = ""


class CancelJob(Record, frozen=True, kw_only=True):
    command_id: UUID | None = None
    job_id: UUID
    actor_id: str
    actor_role: ActorRole
    reason: str
    request_id: str = ""
    expires_at: Instant | None = None


class ReportAttempt(Record, frozen=True, kw_only=True):
    command_id: UUID
    job_id: UUID
    attempt: Attempt


class RenewLease(Record, frozen=True, kw_only=True):
    command_id: UUID
    job_id: UUID
    attempt_number: int
    lease_id: UUID


class StartAttempt(Record, frozen=True, kw_only=True):
    command_id: UUID
    job_id: UUID
    attempt_number: int
    lease_id: UUID


class CheckTimers(Record, frozen=True, kw_only=True):
    command_id: UUID
    job_id: UUID


class ReportCallback(Record, frozen=True, kw_only=True):
    command_id: UUID
    job_id: UUID
    delivered: bool
    delivery_attempts: int
    http_status: int | None = None
    last_error: str | None = None
    webhook_id: str = ""
    attempt_number: int = 0
    retryable: bool = False


class RedriveJob(Record, frozen=True, kw_only=True):
    command_id: UUID | None = None
    job_id: UUID
    actor_id: str
    actor_role: ActorRole
    reason: str
    deadline_at: Instant | None = None
    request_id: str = ""
    expires_at: Instant | None = None
    cache_mode: CacheMode | None = None


class DeleteJobHistory(Record, frozen=True, kw_only=True):
    command_id: UUID | None = None
    job_id: UUID
    actor_id: str
    actor_role: ActorRole
    reason: str
    request_id: str = ""
    expires_at: Instant | None = None


class ReplayCallback(Record, frozen=True, kw_only=True):
    command_id: UUID | None = None
    job_id: UUID
    actor_id: str
    actor_role: ActorRole
    reason: str
    request_id: str = ""
    expires_at: Instant | None = None
    callback_url: str | None = None


class ReportRemoteAttempt(Record, frozen=True, kw_only=True):
    command_id: UUID | None = None
    job_id: UUID
    job_type: str
    attempt_number: int
    lease_id: UUID
    result_body: bytes | None = None
    failure_code: str | None = None
    failure_message: str = ""
    retryable: bool = False
    elapsed_ms: int = 0
    expires_at: Instant | None = None
    kind: ReportKind = ReportKind.ATTEMPT
    result_key: str | None = None


class PurgeAuditRecords(Record, frozen=True, kw_only=True):
    command_id: UUID
    job_id: UUID
    before: Instant
    actor_id: str
    actor_role: ActorRole
    reason: str


class RecordAudit(Record, frozen=True, kw_only=True):
    command_id: UUID
    job_id: UUID
    actor_id: str
    actor_role: ActorRole
    action: AuditAction
    outcome: AuditOutcome
    detail: str
    target: str = ""
    request_id: str = ""
    refusal: str = ""
    reason: str = ""


class _MonitorCommand(Record, frozen=True, kw_only=True):
    """A command on a monitor: its stream's key is the monitor id, where a job's is the job id."""

    monitor_id: UUID

    @property
    def job_id(self) -> UUID:
        return self.monitor_id


class CreateMonitor(Record, frozen=True, kw_only=True):
    command_id: UUID | None = None
    caller_identity: str
    name: str
    spec: MonitorSpec
    submitted_by: str | None = None
    submitter_role: ActorRole | None = None
    request_id: str = ""
    expires_at: Instant | None = None


class EditMonitor(_MonitorCommand, frozen=True, kw_only=True):
    command_id: UUID | None = None
    spec: MonitorSpec
    actor_id: str
    actor_role: ActorRole
    request_id: str = ""
    expires_at: Instant | None = None


class PauseMonitor(_MonitorCommand, frozen=True, kw_only=True):
    command_id: UUID | None = None
    actor_id: str
    actor_role: ActorRole
    reason: str = ""
    request_id: str = ""
    expires_at: Instant | None = None


class ResumeMonitor(_MonitorCommand, frozen=True, kw_only=True):
    command_id: UUID | None = None
    actor_id: str
    actor_role: ActorRole
    reason: str = ""
    request_id: str = ""
    expires_at: Instant | None = None


class DeleteMonitor(_MonitorCommand, frozen=True, kw_only=True):
    command_id: UUID | None = None
    actor_id: str
    actor_role: ActorRole
    reason: str = ""
    request_id: str = ""
    expires_at: Instant | None = None


class RecordCheck(_MonitorCommand, frozen=True, kw_only=True):
    command_id: UUID
    check_job_id: UUID
    status: JobStatus
    outcome: AttemptOutcome | None = None
    http_status: int | None = None
    artifacts: tuple[Artifact, ...] = ()
    failure_code: str | None = None


class ReportCheckReading(_MonitorCommand, frozen=True, kw_only=True):
    command_id: UUID
    check_job_id: UUID
    fingerprint: str | None = None
    diff: str = ""
    diff_truncated: bool = False
    lines_added: int = 0
    lines_removed: int = 0
    problem: str | None = None
    word_diff: str = ""
    triggered: bool = True
    offer: Offer | None = None
    previous_offer: Offer | None = None
    visual: VisualDifference | None = None


MonitorCommand = (
    CreateMonitor
    | EditMonitor
    | PauseMonitor
    | ResumeMonitor
    | DeleteMonitor
    | RecordCheck
    | ReportCheckReading
)
MutationCommand = CancelJob | RedriveJob | DeleteJobHistory | ReplayCallback
Command = (
    SubmitJob
    | CancelJob
    | RedriveJob
    | DeleteJobHistory
    | ReplayCallback
    | RecordAudit
    | PurgeAuditRecords
    | ReportAttempt
    | RenewLease
    | StartAttempt
    | CheckTimers
    | ReportCallback
    | MonitorCommand
)
