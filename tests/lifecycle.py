"""Builders for lifecycle tests: a policy, commands, and a tiny driver around decide/evolve."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from projections.lifecycle.decide import decide
from projections.lifecycle.evolve import evolve
from projections.lifecycle.mutations import refusal_of
from projections.lifecycle.policy import ExecutionProfile, Policy
from projections.lifecycle.state import Job, State, accepted_job
from schemas.commands import (
    CheckTimers,
    Command,
    RecordAudit,
    RenewLease,
    ReportAttempt,
    StartAttempt,
    SubmitJob,
)
from schemas.enums import (
    ActorRole,
    ArtifactTrust,
    AttemptOutcome,
    AuditAction,
    AuditOutcome,
    FailureDisposition,
    TransportRoute,
)
from schemas.events import Event
from schemas.records import Artifact, Attempt, Failure, Request

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
POLICY = Policy.from_declared(
    {"http.fetch": (30_000, 3), "browser.render": (60_000, 2)},
    ExecutionProfile(max_runtime_ms=20_000, max_attempts=3),
    lease_grace_ms=10_000,
    retry_base_ms=1_000,
    start_window_ms=60_000,
    first_check_spread_s=0,  # a baseline at creation; the spread is tested on its own
)


def submit(**overrides: Any) -> SubmitJob:
    fields: dict[str, Any] = {
        "command_id": uuid4(),
        "caller_identity": "svc-a",
        "request": Request(url="https://example.com/page"),
        "deadline_at": T0 + timedelta(hours=1),
    }
    return SubmitJob(**(fields | overrides))


def audit_command(
    job_id: UUID,
    action: AuditAction = AuditAction.JOB_READ,
    outcome: AuditOutcome = AuditOutcome.ALLOWED,
    actor: str = "svc-b",
    role: ActorRole = ActorRole.SERVICE,
    detail: str = "allowed",
    **fields: Any,
) -> RecordAudit:
    """An audit record for the job or audit stream `job_id`, as an API handler sends one."""
    return RecordAudit(
        command_id=uuid4(),
        job_id=job_id,
        actor_id=actor,
        actor_role=role,
        detail=detail,
        action=action,
        outcome=outcome,
        **fields,
    )


def failure(code: str = "HTTP_503", retryable: bool = True, retry_at: datetime | None = None) -> Failure:
    disposition = FailureDisposition.RETRYABLE if retryable else FailureDisposition.TERMINAL
    return Failure(code=code, disposition=disposition, retry_at=retry_at, safe_message=code)


def attempt_under(job: Job, outcome: AttemptOutcome = AttemptOutcome.FETCHED, **overrides: Any) -> Attempt:
    assert job.lease is not None
    fields: dict[str, Any] = {
        "attempt_number": job.lease.attempt_number,
        "lease_id": job.lease.lease_id,
        "route": TransportRoute.DIRECT,
        "outcome": outcome,
        "trust": ArtifactTrust.VERIFIED,
        "finished_at": T0,
    }
    return Attempt(**(fields | overrides))


def report(job: Job, attempt: Attempt) -> ReportAttempt:
    return ReportAttempt(command_id=uuid4(), job_id=job.job_id, attempt=attempt)


def renew(job: Job) -> RenewLease:
    assert job.lease is not None
    return RenewLease(
        command_id=uuid4(),
        job_id=job.job_id,
        attempt_number=job.lease.attempt_number,
        lease_id=job.lease.lease_id,
    )


def start(job: Job) -> StartAttempt:
    assert job.lease is not None
    return StartAttempt(
        command_id=uuid4(),
        job_id=job.job_id,
        attempt_number=job.lease.attempt_number,
        lease_id=job.lease.lease_id,
    )


def tick(job_id: UUID) -> CheckTimers:
    return CheckTimers(command_id=uuid4(), job_id=job_id)


ARTIFACT = Artifact(
    artifact_id=UUID(int=1), key="sha256/ab/abcd", content_type="text/html", size_bytes=4, sha256="ab" * 32
)


@dataclass
class Lifecycle:
    """Feeds commands through decide and evolve, keeping every event, as the lifecycle agent does:
    a refused mutation leaves the job alone and is decided in its actor's audit stream, whose
    events it returns (kept in `audit_streams`, not in `events`)."""

    policy: Policy = POLICY
    state: State = None
    events: list[Event] = field(default_factory=list)
    audit_streams: dict[UUID, State] = field(default_factory=dict)

    def __call__(self, command: Command, now: datetime = T0) -> list[Event]:
        refused = refusal_of(self.state, command, now)
        if refused is not None:
            stream = self.audit_streams.get(refused.job_id)
            audited = decide(stream, refused, now, self.policy)
            for event in audited:
                stream = evolve(stream, event)
            self.audit_streams[refused.job_id] = stream
            return audited
        decided = decide(self.state, command, now, self.policy)
        for event in decided:
            self.state = evolve(self.state, event)
        self.events.extend(decided)
        return decided

    @property
    def job(self) -> Job:
        job = accepted_job(self.state)
        assert job is not None
        return job


def kinds(events: list[Event]) -> list[str]:
    return [type(event).__name__ for event in events]
