"""Submission rules: idempotent accept (deterministic job id, `reused`) or a specific rejection.

Who may submit is decided first: a submission made as another caller without the right to is
rejected in the submitter's own stream (`refused_job_id_for`), so it never touches, or even
names, the other caller's job. A job's identity is everything that changes what it produces
(`produces`): the canonical request, the job type, capture, rendering, policy class, transport,
retention, cache mode and callback. The default idempotency key is a hash of all of it, and an
explicit key sent again with any of it different is rejected `IDEMPOTENCY_KEY_REUSED`, never
answered with the earlier job.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from uuid import UUID

import msgspec

from projections.lifecycle.audit import FORBIDDEN, audit, audited_by_acceptance
from projections.lifecycle.dispatch import lease_until
from projections.lifecycle.emit import Emitter
from projections.lifecycle.identity import (
    CanonicalRequest,
    Rejection,
    callback_url_problem,
    canonicalize,
    is_valid_callback_url,
    job_id_for,
    job_target,
    origin_of,
    refused_job_id_for,
)
from projections.lifecycle.limits import (
    MAX_ACTOR_BYTES,
    MAX_CALLBACK_URL_BYTES,
    MAX_CALLER_BYTES,
    MAX_IDEMPOTENCY_KEY_BYTES,
    MAX_MESSAGE_BYTES,
    MAX_URL_BYTES,
    clip,
    oversized_field,
    oversized_labels,
    utf8_len,
)
from projections.lifecycle.policy import Policy
from projections.lifecycle.state import Job, State
from schemas.commands import SubmitJob
from schemas.enums import ActorRole, AuditAction, AuditOutcome, CaptureMode, RejectionReason, TransportPolicy
from schemas.events import Event, JobAccepted, JobRejected, SubmissionReused
from schemas.records import RenderOptions

HTTP_FETCH, BROWSER_RENDER = "http.fetch", "browser.render"
BROWSER_CAPTURE_MODES = frozenset({CaptureMode.RENDERED_HTML, CaptureMode.SCREENSHOT})
WAIT_EVENTS = frozenset({"load", "domcontentloaded", "networkidle"})
MAX_SELECTOR_BYTES = 1_024
MAX_TRACEPARENT_CHARS = 55  # W3C version 00: "00-" 32 hex "-" 16 hex "-" 2 hex
MAX_TRACESTATE_CHARS = 512  # W3C: a vendor may drop a longer one
MIN_VIEWPORT, MAX_VIEWPORT = 16, 4_096
SUBMITTING_ROLES = frozenset({ActorRole.SERVICE, ActorRole.OPERATOR, ActorRole.ADMIN})


IDENTITIES_KEPT = 4_096
_IDENTITIES: dict[int, tuple[SubmitJob, tuple[UUID, str]]] = {}


def submission_identity(command: SubmitJob) -> tuple[UUID, str]:
    """The job id and resolved idempotency key; the key defaults to the hash of what the job
    produces (`produces`).

    A submission its submitter may not make is placed in the submitter's own stream."""
    # Remembered per command object: routing, the fold's target and the decision each ask it.
    known = _IDENTITIES.get(id(command))
    if known is not None and known[0] is command:
        return known[1]
    identity = _identity(command)
    if len(_IDENTITIES) >= IDENTITIES_KEPT:
        _IDENTITIES.clear()
    _IDENTITIES[id(command)] = (command, identity)
    return identity


def _identity(command: SubmitJob) -> tuple[UUID, str]:
    key = command.idempotency_key
    if key is None:
        canonical = canonicalize(command.request)
        if isinstance(canonical, CanonicalRequest):
            key = produces(command, canonical.request_hash)
        else:
            key = hashlib.sha256(msgspec.json.encode(command.request)).hexdigest()
    if command.submitted_by is not None and _not_permitted(command) is not None:
        return refused_job_id_for(command.submitted_by, command.caller_identity, key), key
    return job_id_for(command.caller_identity, key), key


def decide_submit(
    state: State, command: SubmitJob, command_id: UUID, now: datetime, policy: Policy
) -> list[Event]:
    if command.expires_at is not None and command.expires_at < now:
        return []  # intake refuses it already; one written past intake changes nothing either
    job_id, key = submission_identity(command)
    emit = Emitter(command_id, job_id, 0 if state is None else state.sequence, now)
    refused = _not_permitted(command)
    if isinstance(state, Job) and refused is None:
        if _same_job(state, command):
            emit(SubmissionReused, caller_identity=command.caller_identity)
        else:
            detail = f"idempotency key {clip(key, 64)!r} names job {job_id}: a different request or options"
            _reject(command, key, Rejection(RejectionReason.IDEMPOTENCY_KEY_REUSED, detail), emit)
        return emit.events
    checked = refused or _validate(command, now, policy)
    if isinstance(checked, Rejection):
        _reject(command, key, checked, emit)
        if refused is not None:
            _audit_creation(command, emit, refused.detail)
        return emit.events
    _accept(command, checked, key, policy, emit)  # handed out at once: its first lease is in it
    _audit_creation(command, emit, None)
    return emit.events


def produces(command: SubmitJob, request_hash: str) -> str:
    """The hash of everything that changes what a submission's job produces."""
    rendered = renders(command.job_type, command.transport_policy)
    return _produces(
        request_hash,
        command.job_type,
        command.capture_mode,
        command.render,
        command.policy_class,
        TransportPolicy.BROWSER if rendered else command.transport_policy,
        command.retention_class,
        command.cache_mode,
        command.callback_url,
        *_credential_of(command.credential),
    )


def _produces(request_hash: str, *options: object) -> str:
    values = [
        msgspec.to_builtins(option) if isinstance(option, RenderOptions) else option for option in options
    ]
    payload = json.dumps([request_hash, *values], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def _same_job(job: Job, command: SubmitJob) -> bool:
    """Whether a submission asks for what the job already is (its key may be the caller's own)."""
    canonical = canonicalize(command.request)
    if not isinstance(canonical, CanonicalRequest):
        return False
    accepted = job.accepted
    earlier = _produces(
        accepted.request_hash,
        accepted.job_type,
        accepted.capture_mode,
        accepted.render,
        accepted.policy_class,
        accepted.transport_policy,
        accepted.retention_class,
        accepted.cache_mode,
        accepted.callback_url,
        *_credential_of(accepted.credential),
    )
    return earlier == produces(command, canonical.request_hash)


def _credential_of(name: str | None) -> tuple[str, ...]:
    """A credential's name in what a job produces: absent when none, so earlier keys stay as they were."""
    return () if name is None else (name,)


def _not_permitted(command: SubmitJob) -> Rejection | None:
    """A verified submitter (auth on) may submit for itself; operators and admins for anyone."""
    role = command.submitter_role
    if command.submitted_by is None or role is None:
        return None
    if role not in SUBMITTING_ROLES:
        return Rejection(RejectionReason.NOT_PERMITTED, f"role {role} may not submit jobs")
    if role is ActorRole.SERVICE and command.submitted_by != command.caller_identity:
        detail = f"{clip(command.submitted_by, 256)!r} may submit only as itself, not as another caller"
        return Rejection(RejectionReason.NOT_PERMITTED, detail)
    return None


def _audit_creation(command: SubmitJob, emit: Emitter, denial: str | None) -> None:
    actor_id = command.submitted_by or command.caller_identity
    actor_role = command.submitter_role or ActorRole.SERVICE
    if denial is None and audited_by_acceptance(actor_id, actor_role, command.caller_identity):
        return
    audit(
        emit,
        actor_id=actor_id,
        actor_role=actor_role,
        action=AuditAction.JOB_CREATE,
        outcome=AuditOutcome.ALLOWED if denial is None else AuditOutcome.DENIED,
        detail=denial or "created",
        target=job_target(emit.job_id),
        refusal="" if denial is None else FORBIDDEN,
    )


def _validate(command: SubmitJob, now: datetime, policy: Policy) -> CanonicalRequest | Rejection:
    too_large = _oversized(command)
    if too_large is not None:
        return Rejection(RejectionReason.INPUT_TOO_LARGE, too_large)
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
        detail = f"job type {clip(command.job_type, 256)!r} is not one of: {known}"
        return Rejection(RejectionReason.UNKNOWN_JOB_TYPE, detail)
    refused = _credential_refusal(command, policy)
    if refused is not None:
        return Rejection(RejectionReason.CREDENTIAL_NOT_ALLOWED, refused)
    off = policy.disabled_types.get(command.job_type)
    if off is not None:
        return Rejection(
            RejectionReason.JOB_TYPE_DISABLED, f"job type {command.job_type!r} is switched off: {off}"
        )
    unrunnable = _unrunnable(command, policy)
    if unrunnable is not None:
        return Rejection(RejectionReason.UNSUPPORTED_JOB_TYPE, unrunnable)
    limit = command.attempt_limit
    if limit is not None and not 1 <= limit <= profile.max_attempts:
        detail = f"attempt_limit {limit} is outside 1..{profile.max_attempts} for {command.job_type}"
        return Rejection(RejectionReason.ATTEMPT_LIMIT_OUT_OF_RANGE, detail)
    return _options_rejection(command) or canonical


def _unrunnable(command: SubmitJob, policy: Policy) -> str | None:
    """Why no running worker can run the job, when none announces its runner (outside executors
    run remote types: they announce nothing)."""
    runner = runner_of(command.job_type, command.transport_policy)
    if policy.runners is None or runner in policy.runners or command.job_type in policy.remote_types:
        return None
    why = policy.cannot_run.get(runner, "no running worker's executor reads its work")
    return f"no running worker can run {clip(runner, 64)!r}: {clip(why, 512)}"


def _credential_refusal(command: SubmitJob, policy: Policy) -> str | None:
    """Why the submission may not carry its credential (never its value: the core has none)."""
    name = command.credential
    if name is None:
        return None
    grant = policy.credentials.get(name)
    if grant is None:
        return f"no credential {clip(name, 64)!r} in this deployment"
    if renders(command.job_type, command.transport_policy):
        return "a rendered page cannot carry a credential: its page would send it to every origin it loads"
    proxied = command.transport_policy is TransportPolicy.PROXY_ALLOWED
    refused = grant.refusal(command.caller_identity, command.job_type) or grant.use_refusal(
        origin_of(command.request.url), proxied
    )
    return None if refused is None else f"credential {name!r}: {refused}"


def _options_rejection(command: SubmitJob) -> Rejection | None:
    problem = None if command.callback_url is None else callback_url_problem(command.callback_url)
    if problem is not None:
        return Rejection(RejectionReason.INVALID_CALLBACK_URL, problem)
    rendered = renders(command.job_type, command.transport_policy)
    if command.capture_mode in BROWSER_CAPTURE_MODES and not rendered:
        detail = (
            f"capture_mode {command.capture_mode} needs a rendered page: "
            f"job type {BROWSER_RENDER} or transport_policy {TransportPolicy.BROWSER}"
        )
        return Rejection(RejectionReason.UNSUPPORTED_CAPTURE_MODE, detail)
    if command.render is not None:
        problem = render_problem(command.render) if rendered else "render options need a rendered page"
        if problem is not None:
            return Rejection(RejectionReason.INVALID_RENDER_OPTIONS, problem)
    return None


def renders(job_type: str, transport_policy: TransportPolicy) -> bool:
    """Whether the job's page is rendered by a browser."""
    return job_type == BROWSER_RENDER or (
        job_type == HTTP_FETCH and transport_policy is TransportPolicy.BROWSER
    )


def runner_of(job_type: str, transport_policy: TransportPolicy) -> str:
    """The job type whose executors run the work: a rendered fetch is the browser's."""
    return BROWSER_RENDER if renders(job_type, transport_policy) else job_type


def render_problem(options: RenderOptions) -> str | None:
    if options.wait_until not in WAIT_EVENTS:
        return f"wait_until {clip(options.wait_until, 64)!r} is not one of: {', '.join(sorted(WAIT_EVENTS))}"
    selector = options.wait_selector
    if selector is not None and not 0 < utf8_len(selector) <= MAX_SELECTOR_BYTES:
        return f"wait_selector must be 1 to {MAX_SELECTOR_BYTES} bytes"
    if selector is not None and _chains(selector):
        return "wait_selector is a CSS selector: '>>' outside a quoted string chains browser-driver selectors"
    for name, size in (
        ("viewport_width", options.viewport_width),
        ("viewport_height", options.viewport_height),
    ):
        if not MIN_VIEWPORT <= size <= MAX_VIEWPORT:
            return f"{name} {size} is outside {MIN_VIEWPORT}..{MAX_VIEWPORT}"
    return None


def _chains(selector: str) -> bool:
    """Whether `selector` has a `>>` outside quotes, which the browser driver reads as a chain of
    its own selector engines (xpath=, text=, frames) rather than as CSS."""
    quote: str | None = None
    escaped = False
    for index, char in enumerate(selector):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif quote is not None:
            quote = None if char == quote else quote
        elif char in "'\"`":
            quote = char
        elif selector.startswith(">>", index):
            return True
    return False


def _oversized(command: SubmitJob) -> str | None:
    return oversized_field(
        {
            "caller_identity": (command.caller_identity, MAX_CALLER_BYTES),
            "idempotency_key": (command.idempotency_key, MAX_IDEMPOTENCY_KEY_BYTES),
            "job_type": (command.job_type, MAX_CALLER_BYTES),
            "request.url": (command.request.url, MAX_URL_BYTES),
            "callback_url": (command.callback_url, MAX_CALLBACK_URL_BYTES),
        }
    ) or oversized_labels(command.labels)


def _reject(command: SubmitJob, key: str, rejection: Rejection, emit: Emitter) -> None:
    """The rejection carries what its completion and callback need, cut to the accepted bounds."""
    callback_url = command.callback_url
    # A submission refused as another caller calls nobody back: the callback would be that caller's.
    usable_callback = (
        rejection.reason is not RejectionReason.NOT_PERMITTED
        and callback_url is not None
        and oversized_field({"callback_url": (callback_url, MAX_CALLBACK_URL_BYTES)}) is None
        and is_valid_callback_url(callback_url)
    )
    emit(
        JobRejected,
        caller_identity=clip(command.caller_identity, MAX_CALLER_BYTES),
        idempotency_key=clip(key, MAX_IDEMPOTENCY_KEY_BYTES),
        reason=rejection.reason,
        detail=clip(rejection.detail, MAX_MESSAGE_BYTES),
        job_type=clip(command.job_type, MAX_CALLER_BYTES),
        url=clip(command.request.url, MAX_URL_BYTES),
        callback_url=callback_url if usable_callback else None,
        labels=command.labels if oversized_labels(command.labels) is None else {},
        submitted_by=None if command.submitted_by is None else clip(command.submitted_by, MAX_CALLER_BYTES),
    )


def rejection_owner(rejected: JobRejected) -> str:
    """Who may read a rejected submission: its caller, or the submitter it was refused to."""
    if rejected.reason is RejectionReason.NOT_PERMITTED and rejected.submitted_by is not None:
        return rejected.submitted_by
    return rejected.caller_identity


def _accept(
    command: SubmitJob, canonical: CanonicalRequest, key: str, policy: Policy, emit: Emitter
) -> JobAccepted:
    profile = policy.profile(command.job_type) or policy.default_profile
    rendered = renders(command.job_type, command.transport_policy)
    return emit(
        JobAccepted,
        caller_identity=command.caller_identity,
        request=canonical.request,
        job_type=command.job_type,
        policy_class=command.policy_class,
        cache_mode=command.cache_mode,
        capture_mode=command.capture_mode,
        retention_class=command.retention_class,
        transport_policy=TransportPolicy.BROWSER if rendered else command.transport_policy,
        deadline_at=command.deadline_at,
        callback_url=command.callback_url,
        labels=command.labels,
        idempotency_key=key,
        attempt_limit=command.attempt_limit or profile.max_attempts,
        request_hash=canonical.request_hash,
        max_runtime_ms=profile.max_runtime_ms,
        render=command.render,
        credential=command.credential,
        first_lease_expires_at=lease_until(profile.max_runtime_ms, emit.now, policy),
        traceparent=_bounded(command.traceparent, MAX_TRACEPARENT_CHARS),
        tracestate=_bounded(command.tracestate, MAX_TRACESTATE_CHARS),
        request_id=clip(command.request_id, MAX_ACTOR_BYTES),
    )


def _bounded(text: str | None, limit: int) -> str | None:
    """A trace header kept only within its W3C size: readers parse it and ignore a malformed one."""
    return text if text is not None and len(text) <= limit else None
