"""Submission rules: idempotent accept (deterministic job id, `reused`) or a specific rejection."""

from __future__ import annotations

import hashlib
from datetime import datetime
from uuid import UUID

from projections.lifecycle.dispatch import dispatch
from projections.lifecycle.emit import Emitter
from projections.lifecycle.evolve import start
from projections.lifecycle.identity import (
    CanonicalRequest,
    Rejection,
    canonicalize,
    is_valid_callback_url,
    job_id_for,
)
from projections.lifecycle.policy import Policy
from projections.lifecycle.state import Job
from schemas.commands import SubmitJob
from schemas.enums import RejectionReason
from schemas.events import Event, JobAccepted, JobRejected, SubmissionReused


def submission_identity(command: SubmitJob) -> tuple[UUID, str]:
    """The job id and resolved idempotency key; the key defaults to the canonical request hash."""
    key = command.idempotency_key
    if key is None:
        canonical = canonicalize(command.request)
        if isinstance(canonical, CanonicalRequest):
            key = canonical.request_hash
        else:
            key = hashlib.sha256(command.request.model_dump_json().encode()).hexdigest()
    return job_id_for(command.caller_identity, key), key


def decide_submit(
    state: Job | None, command: SubmitJob, command_id: UUID, now: datetime, policy: Policy
) -> list[Event]:
    job_id, key = submission_identity(command)
    emit = Emitter(command_id, job_id, 0 if state is None else state.sequence, now)
    if state is not None:
        emit(SubmissionReused, caller_identity=command.caller_identity)
        return emit.events
    checked = _validate(command, now, policy)
    if isinstance(checked, Rejection):
        emit(
            JobRejected,
            caller_identity=command.caller_identity,
            idempotency_key=key,
            reason=checked.reason,
            detail=checked.detail,
        )
        return emit.events
    accepted = _accept(command, checked, key, policy, emit)
    dispatch(start(accepted), emit, policy)
    return emit.events


def _validate(command: SubmitJob, now: datetime, policy: Policy) -> CanonicalRequest | Rejection:
    if not command.caller_identity.strip():
        return Rejection(RejectionReason.INVALID_CALLER, "caller_identity is empty")
    canonical = canonicalize(command.request)
    if isinstance(canonical, Rejection):
        return canonical
    if command.deadline_at <= now:
        return Rejection(
            RejectionReason.DEADLINE_IN_PAST, f"deadline {command.deadline_at} is not after {now}"
        )
    profile = policy.profile(command.job_type)
    if profile is None:
        known = ", ".join(sorted(policy.profiles))
        return Rejection(
            RejectionReason.UNKNOWN_JOB_TYPE, f"job type {command.job_type!r} is not one of: {known}"
        )
    limit = command.attempt_limit
    if limit is not None and not 1 <= limit <= profile.max_attempts:
        detail = f"attempt_limit {limit} is outside 1..{profile.max_attempts} for {command.job_type}"
        return Rejection(RejectionReason.ATTEMPT_LIMIT_OUT_OF_RANGE, detail)
    if command.callback_url is not None and not is_valid_callback_url(command.callback_url):
        detail = f"callback_url {command.callback_url!r} is not an absolute http(s) URL"
        return Rejection(RejectionReason.INVALID_CALLBACK_URL, detail)
    return canonical


def _accept(
    command: SubmitJob, canonical: CanonicalRequest, key: str, policy: Policy, emit: Emitter
) -> JobAccepted:
    profile = policy.profile(command.job_type) or policy.default_profile
    return emit(
        JobAccepted,
        caller_identity=command.caller_identity,
        request=canonical.request,
        job_type=command.job_type,
        policy_class=command.policy_class,
        cache_mode=command.cache_mode,
        capture_mode=command.capture_mode,
        retention_class=command.retention_class,
        transport_policy=command.transport_policy,
        deadline_at=command.deadline_at,
        callback_url=command.callback_url,
        labels=command.labels,
        idempotency_key=key,
        attempt_limit=command.attempt_limit or profile.max_attempts,
        request_hash=canonical.request_hash,
        max_runtime_ms=profile.max_runtime_ms,
    )
