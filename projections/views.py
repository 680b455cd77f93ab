"""Read-side views: what the HTTP API returns, as models (its OpenAPI document is generated from them)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal
from urllib.parse import urlsplit
from uuid import UUID

import msgspec
from pydantic import BaseModel, ConfigDict, Field

from projections.lifecycle.attempts import recorded_attempt
from projections.lifecycle.completion import webhook_id_of
from projections.lifecycle.identity import shown_url
from projections.lifecycle.monitors import checked_monitor
from projections.lifecycle.state import Job, Unaccepted, is_denial
from schemas.enums import (
    ActorRole,
    ArtifactTrust,
    AttemptOutcome,
    AuditAction,
    AuditOutcome,
    CacheMode,
    CaptureMode,
    FailureDisposition,
    HttpMethod,
    JobStatus,
    PolicyClass,
    RetentionClass,
    TransportPolicy,
    TransportRoute,
)
from schemas.events import (
    AuditRecorded,
    CallbackAbandoned,
    CallbackDelivered,
    CallbackDispatched,
    CallbackReplayed,
    CallbackRetryScheduled,
    Event,
    JobAccepted,
    JobCancelled,
    JobDeadLettered,
    JobRejected,
    JobSucceeded,
)
from schemas.records import Artifact, Attempt, Cost, Failure


class View(BaseModel):
    model_config = ConfigDict(frozen=True)


class FailureView(View):
    code: str
    disposition: FailureDisposition
    message: str
    retry_at: datetime | None = None


class CostView(View):
    estimated: str = Field(description="Decimal amount, as a string")
    actual: str = Field(description="Decimal amount, as a string")
    bytes: int
    browser_seconds: str = Field(description="Decimal seconds, as a string")


class ArtifactView(View):
    artifact_id: UUID
    content_type: str
    size_bytes: int
    sha256: str
    expires_at: datetime | None
    download_path: str = Field(description="GET this path of any worker for the bytes")


class AttemptView(View):
    attempt_number: int
    lease_id: UUID = Field(
        description="The attempt's identity: the lease it ran under, as route reservations and logs name it"
    )
    route: TransportRoute
    route_name: str | None = Field(description="The configured route the attempt went through")
    outcome: AttemptOutcome
    trust: ArtifactTrust
    http_status: int | None
    final_url: str | None
    bytes: int
    elapsed_ms: int
    failure: FailureView | None
    cost: CostView
    artifacts: list[ArtifactView]
    finished_at: datetime
    requests: int = Field(
        description="Requests the attempt made: each redirect hop, a refetch and, for a rendered page, "
        "each request the page made; 0 when answered from the cache or denied"
    )
    blocked_requests: list[str] = Field(
        description="Requests a rendered page made that the address rules refused"
    )
    from_cache: bool = Field(description="Answered from the response cache: no request reached the origin")
    cached_at: datetime | None = Field(description="For an answer from the cache: when its entry was stored")
    cache_age_ms: int | None = Field(
        description="For an answer from the cache: its entry's age when it answered"
    )
    cache_entry_job_id: UUID | None = Field(
        description="For an answer from the cache: the job that made the entry"
    )


class RequestSummary(View):
    method: HttpMethod
    url: str
    header_names: list[str]


class LeaseView(View):
    attempt_number: int
    lease_id: UUID
    lease_expires_at: datetime
    started_at: datetime | None


class Totals(View):
    attempts: int = Field(description="Attempts recorded, denials included")
    charged_attempts: int = Field(description="Attempts and lapsed leases charged to budgets")
    budget_spent: int = Field(description="Charged since the budget was granted (acceptance or redrive)")
    bytes: int
    elapsed_ms: int
    cost_actual: str = Field(description="Decimal sum of the attempts' actual cost, as a string")


HEX = frozenset("0123456789abcdef")


class JobView(View):
    """A job, or a rejected submission (`state` `REJECTED`: only what the submission named is known,
    its options are null and its failure is the reason)."""

    job_id: UUID
    state: JobStatus
    caller_identity: str
    idempotency_key: str
    job_type: str
    request: RequestSummary
    policy_class: PolicyClass | None
    cache_mode: CacheMode | None
    capture_mode: CaptureMode | None
    retention_class: RetentionClass | None
    transport_policy: TransportPolicy | None
    labels: dict[str, str]
    attempt_limit: int
    attempts: list[AttemptView]
    artifacts: list[ArtifactView]
    failure: FailureView | None
    lease: LeaseView | None
    totals: Totals
    accepted_at: datetime = Field(description="When it was accepted (a rejected submission: rejected)")
    redriven_at: datetime | None = Field(default=None, description="When it was last redriven; null: never")
    deadline_at: datetime | None
    next_attempt_at: datetime | None
    completed_at: datetime | None
    reuse_count: int
    callbacks_pending: int
    callback_host: str | None = Field(
        description="The host its outcome is POSTed to (the URL itself may hold a secret); null: no callback"
    )
    sequence: int
    trace_id: str | None = Field(
        default=None, description="The W3C trace id of the job (its completion and callback carry it)"
    )
    trace_url: str | None = Field(
        default=None,
        description="The trace in the deployment's trace viewer (SCRAPESTREAM_TRACE_URL_TEMPLATE)",
    )
    monitor_id: UUID | None = Field(
        default=None, description="The monitor this job is a scheduled check of; null: not a check"
    )


class JobList(View):
    items: list[JobView]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null at the end")


class EventView(View):
    type: str
    sequence: int
    event_id: UUID
    occurred_at: datetime
    command_id: UUID
    data: dict[str, Any] = Field(description="The event's own fields, as in its Avro schema")


class StepView(View):
    sequence: int = Field(description="The event that made the decision")
    at: datetime
    rule: str = Field(description="The lifecycle rule that decided, e.g. `retry.retry_after`")
    said: str


class Explanation(View):
    job_id: UUID
    state: JobStatus
    why: str = Field(description="Where the job is, and the last decision that put it there")
    steps: list[StepView]


class CallbackTryView(View):
    webhook_id: str = Field(description="The delivery's `webhook-id`, the same on every try")
    try_number: int
    sent_at: datetime = Field(description="When the try was handed to the sender")
    answered_at: datetime | None = Field(description="When its outcome was recorded; null while in flight")
    outcome: Literal["in_flight", "delivered", "failed", "abandoned"]
    http_status: int | None = Field(
        description="The receiver's answer; null when it gave none (timeout, refused)"
    )
    latency_ms: int | None = Field(description="From sending the try to recording its outcome")
    error: str | None = Field(description="Why a failed or abandoned try did not land")
    next_try_at: datetime | None = Field(description="For a failed try: when the next one is due")
    callback_url: str | None = Field(description="Where it was delivered (known once it ended)")
    replay: bool = Field(description="A try of a delivery replayed by an operator or admin")


class CallbackLog(View):
    job_id: UUID
    items: list[CallbackTryView]


class EventList(View):
    job_id: UUID
    items: list[EventView]


class AuditView(View):
    audit_id: UUID
    job_id: UUID
    occurred_at: datetime
    actor_id: str
    actor_role: ActorRole
    action: AuditAction
    outcome: AuditOutcome
    reason: str
    detail: str
    refusal: str
    request_id: str
    target: str


class AuditList(View):
    items: list[AuditView]
    next_cursor: str | None


NO_COST = Cost().actual
ENVELOPE_FIELDS = frozenset({"event_id", "job_id", "sequence", "occurred_at", "command_id"})


def failure_view(failure: Failure | None) -> FailureView | None:
    if failure is None:
        return None
    return FailureView.model_construct(
        code=failure.code,
        disposition=failure.disposition,
        message=failure.safe_message,
        retry_at=failure.retry_at,
    )


def artifact_view(artifact: Artifact) -> ArtifactView:
    return ArtifactView.model_construct(
        artifact_id=artifact.artifact_id,
        content_type=artifact.content_type,
        size_bytes=artifact.size_bytes,
        sha256=artifact.sha256,
        expires_at=artifact.expires_at,
        download_path=f"/artifacts/{artifact.artifact_id}",
    )


def attempt_view(attempt: Attempt) -> AttemptView:
    cost = attempt.cost
    return AttemptView.model_construct(
        attempt_number=attempt.attempt_number,
        lease_id=attempt.lease_id,
        route=attempt.route,
        route_name=attempt.route_name,
        outcome=attempt.outcome,
        trust=attempt.trust,
        http_status=attempt.http_status,
        final_url=attempt.final_url,
        bytes=attempt.bytes,
        elapsed_ms=attempt.elapsed_ms,
        failure=failure_view(attempt.failure),
        cost=CostView.model_construct(
            estimated=str(cost.estimated),
            actual=str(cost.actual),
            bytes=cost.bytes,
            browser_seconds=str(cost.browser_seconds),
        ),
        artifacts=[artifact_view(artifact) for artifact in attempt.artifacts],
        finished_at=attempt.finished_at,
        requests=attempt.requests,
        blocked_requests=list(attempt.blocked_requests),
        from_cache=attempt.from_cache,
        cached_at=attempt.cached_at,
        cache_age_ms=None
        if attempt.cached_at is None
        else int((attempt.finished_at - attempt.cached_at).total_seconds() * 1000),
        cache_entry_job_id=attempt.cache_entry_job_id,
    )


HIDDEN_CACHE_FIELDS = {"cached_at": None, "cache_entry_job_id": None}


def own_view(view: JobView) -> JobView:
    """`view` as a principal that reads only its own jobs sees it: nothing of the shared cache entry
    that answered an attempt (which job stored it, and when), as that job may be another caller's."""
    attempts = [
        attempt.model_copy(update=HIDDEN_CACHE_FIELDS | {"cache_age_ms": None})
        if attempt.from_cache
        else attempt
        for attempt in view.attempts
    ]
    return view.model_copy(update={"attempts": attempts})


def own_events(events: Iterable[Event]) -> list[Event]:
    """`events` as a principal that reads only its own jobs sees them (as `own_view`)."""
    return [_own_event(event) for event in events]


def _own_event(event: Event) -> Event:
    attempt = recorded_attempt(event)
    if attempt is None or not attempt.from_cache:
        return event
    return msgspec.structs.replace(event, attempt=msgspec.structs.replace(attempt, **HIDDEN_CACHE_FIELDS))


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id a W3C `traceparent` names, if it is well formed."""
    parts = (traceparent or "").split("-")
    found = parts[1] if len(parts) >= 4 else ""
    return found if len(found) == 32 and found != "0" * 32 and all(c in HEX for c in found) else None


def job_view(job: Job) -> JobView:
    """Built from the job's own validated state: no second validation on the read path."""
    accepted = job.accepted
    lease = job.lease
    return JobView.model_construct(
        job_id=job.job_id,
        state=job.status,
        caller_identity=accepted.caller_identity,
        callback_host=_host_of(accepted.callback_url),
        trace_id=trace_id_of(accepted.traceparent),
        idempotency_key=accepted.idempotency_key,
        monitor_id=checked_monitor(accepted.idempotency_key),
        job_type=accepted.job_type,
        request=RequestSummary.model_construct(
            method=accepted.request.method,
            url=accepted.request.url,
            header_names=sorted(accepted.request.headers),
        ),
        policy_class=accepted.policy_class,
        cache_mode=accepted.cache_mode,
        capture_mode=accepted.capture_mode,
        retention_class=accepted.retention_class,
        transport_policy=accepted.transport_policy,
        labels=dict(accepted.labels),
        attempt_limit=accepted.attempt_limit,
        attempts=[attempt_view(attempt) for attempt in job.attempts],
        artifacts=[artifact_view(artifact) for artifact in job.artifacts],
        failure=failure_view(job.failure),
        lease=None
        if lease is None
        else LeaseView.model_construct(
            attempt_number=lease.attempt_number,
            lease_id=lease.lease_id,
            lease_expires_at=lease.lease_expires_at,
            started_at=lease.started_at,
        ),
        totals=Totals.model_construct(
            attempts=len(job.attempts),
            charged_attempts=job.charged_attempts,
            budget_spent=job.budget_spent,
            bytes=sum(attempt.bytes for attempt in job.attempts),
            elapsed_ms=sum(attempt.elapsed_ms for attempt in job.attempts),
            cost_actual=str(
                sum((a.cost.actual for a in job.attempts if not is_denial(a)), start=Decimal("0.000000"))
            ),
        ),
        accepted_at=accepted.occurred_at,
        redriven_at=job.redriven_at,
        deadline_at=accepted.deadline_at,
        next_attempt_at=job.next_attempt_at,
        completed_at=job.completed_at,
        reuse_count=job.reuse_count,
        callbacks_pending=len(job.callbacks),
        sequence=job.sequence,
    )


def rejected_view(state: Unaccepted, rejected: JobRejected) -> JobView:
    """A rejected submission as the API shows it: what it asked for and why it was refused."""
    return JobView.model_construct(
        job_id=state.job_id,
        state=JobStatus.REJECTED,
        caller_identity=rejected.caller_identity,
        idempotency_key=rejected.idempotency_key,
        monitor_id=checked_monitor(rejected.idempotency_key),
        job_type=rejected.job_type,
        request=RequestSummary.model_construct(method=HttpMethod.GET, url=rejected.url, header_names=[]),
        policy_class=None,
        cache_mode=None,
        capture_mode=None,
        retention_class=None,
        transport_policy=None,
        labels=dict(rejected.labels),
        attempt_limit=0,
        attempts=[],
        artifacts=[],
        failure=FailureView.model_construct(
            code=rejected.reason.value,
            disposition=FailureDisposition.TERMINAL,
            message=rejected.detail,
            retry_at=None,
        ),
        lease=None,
        totals=Totals.model_construct(
            attempts=0, charged_attempts=0, budget_spent=0, bytes=0, elapsed_ms=0, cost_actual="0.000000"
        ),
        accepted_at=rejected.occurred_at,
        deadline_at=None,
        next_attempt_at=None,
        completed_at=rejected.occurred_at,
        reuse_count=0,
        callbacks_pending=len(state.callbacks),
        callback_host=_host_of(rejected.callback_url),
        sequence=state.sequence,
    )


def listed_view(state: Job | Unaccepted) -> JobView:
    """A job's view, or a rejected submission's."""
    if isinstance(state, Job):
        return job_view(state)
    if state.rejected is None:
        raise ValueError(f"{state.job_id} is neither a job nor a rejected submission")
    return rejected_view(state, state.rejected)


def _host_of(url: str | None) -> str | None:
    return None if url is None else urlsplit(url).hostname or None


def callback_log(events: Iterable[Event]) -> list[CallbackTryView]:
    """Every callback try of a job, from its events: when it was sent, how it was answered."""
    tries: list[dict[str, Any]] = []
    open_tries: dict[str, dict[str, Any]] = {}
    replayed: set[str] = set()
    callback_url = None
    for event in events:
        if isinstance(event, JobAccepted | JobRejected):
            callback_url = event.callback_url
        if isinstance(event, CallbackReplayed):
            replayed.add(event.webhook_id)
        sent = _sent(event, callback_url)
        if sent is not None:
            webhook_id, number = sent
            opened = {"webhook_id": webhook_id, "try_number": number, "sent_at": event.occurred_at}
            tries.append(opened | {"replay": webhook_id in replayed})
            open_tries[webhook_id] = tries[-1]
            continue
        ended = open_tries.pop(getattr(event, "webhook_id", ""), None)
        answer = _answer(event)
        if ended is not None and answer is not None:
            ended |= answer | {"answered_at": event.occurred_at}
            ended["latency_ms"] = int((event.occurred_at - ended["sent_at"]).total_seconds() * 1000)
    return [CallbackTryView(**_CALLBACK_TRY | found) for found in tries]


def _sent(event: Event, callback_url: str | None) -> tuple[str, int] | None:
    """The webhook-id and try number of a callback try `event` sends, if it sends one."""
    if isinstance(event, CallbackReplayed):
        return event.webhook_id, 1
    if isinstance(event, CallbackDispatched):
        return event.webhook_id, event.attempt_number
    if isinstance(event, JobSucceeded | JobDeadLettered | JobCancelled | JobRejected) and callback_url:
        return webhook_id_of(event), 1
    return None


def _answer(event: Event) -> dict[str, Any] | None:
    if isinstance(event, CallbackRetryScheduled):
        return {
            "outcome": "failed",
            "http_status": event.http_status,
            "error": event.last_error,
            "next_try_at": event.next_attempt_at,
        }
    if isinstance(event, CallbackDelivered):
        shown = shown_url(event.callback_url)
        return {"outcome": "delivered", "http_status": event.http_status, "callback_url": shown}
    if isinstance(event, CallbackAbandoned):
        shown = shown_url(event.callback_url)
        return {
            "outcome": "abandoned",
            "http_status": event.http_status,
            "error": event.last_error,
            "callback_url": shown,
        }
    return None


_CALLBACK_TRY: dict[str, Any] = {
    "answered_at": None,
    "outcome": "in_flight",
    "http_status": None,
    "latency_ms": None,
    "error": None,
    "next_try_at": None,
    "callback_url": None,
    "replay": False,
}


def event_view(event: Event) -> EventView:
    data = {name: value for name, value in msgspec.to_builtins(event).items() if name not in ENVELOPE_FIELDS}
    if data.get("callback_url"):
        data["callback_url"] = shown_url(data["callback_url"])
    return EventView.model_construct(
        type=type(event).__name__,
        sequence=event.sequence,
        event_id=event.event_id,
        occurred_at=event.occurred_at,
        command_id=event.command_id,
        data=data,
    )


def audit_view(audit: AuditRecorded) -> AuditView:
    return AuditView.model_construct(
        audit_id=audit.audit_id,
        job_id=audit.job_id,
        occurred_at=audit.occurred_at,
        actor_id=audit.actor_id,
        actor_role=audit.actor_role,
        action=audit.action,
        outcome=audit.outcome,
        reason=audit.reason,
        detail=audit.detail,
        refusal=audit.refusal,
        request_id=audit.request_id,
        target=audit.target,
    )
