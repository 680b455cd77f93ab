"""One job: its view and history (answered by the worker that keeps it), and mutations through Kafka."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlsplit
from uuid import UUID, uuid4

from fastapi import APIRouter, Query, Request, Response

from projections.access import job_read_refusal, reads_own_only
from projections.jobstore import Listed, owner_of
from projections.lifecycle.audit import CONFLICT, FORBIDDEN, INVALID, NOT_FOUND
from projections.lifecycle.explain import explain, why
from projections.lifecycle.history import as_of_refusal, events_until, state_as_of
from projections.lifecycle.identity import job_target, public_command_id
from projections.lifecycle.mutations import mutation_refusal
from projections.lifecycle.state import Job, Unaccepted
from projections.lifecycle.submission import submission_identity
from projections.views import (
    CallbackLog,
    EventList,
    Explanation,
    JobView,
    StepView,
    audit_view,
    callback_log,
    event_view,
    listed_view,
    own_events,
    own_view,
)
from schemas.commands import (
    CancelJob,
    DeleteJobHistory,
    MutationCommand,
    RecordAudit,
    RedriveJob,
    ReplayCallback,
    SubmitJob,
)
from schemas.enums import AuditAction, AuditOutcome
from schemas.events import AuditRecorded, Event, JobAccepted, JobRejected, SubmissionReused
from streams.auth.principals import Principal
from streams.clock import utc_now
from streams.jobtypes import history_deletion_veto
from streams.moments import as_utc
from streams.runtime import trace_context
from streams.runtime.decisions import Decided
from streams.runtime.publisher import outgoing
from streams.web.auth import Caller
from streams.web.context import commands_of, reads_of, request_id
from streams.web.errors import ApiError, responses
from streams.web.models import (
    MutationBody,
    MutationResult,
    RedriveBody,
    ReplayBody,
    SubmissionResult,
    SubmitBody,
)
from streams.web.ports import Reads

JSON = "application/json"
DECISION_TIMEOUT_S = 10.0
REFUSALS = {
    FORBIDDEN: (403, "forbidden"),
    NOT_FOUND: (404, "not_found"),
    CONFLICT: (409, "conflict"),
    INVALID: (400, "invalid_request"),
}
READ_ERRORS = responses(400, 401, 404, 422, 429, 503)
AsOf = Annotated[
    datetime | None,
    Query(description="The job as it was then (RFC 3339, UTC unless it says): its events folded up to it"),
]
Until = Annotated[datetime | None, Query(description="Only the events that had happened by then (RFC 3339)")]
MUTATION_RESPONSES: dict[int | str, dict[str, Any]] = {
    202: {"model": MutationResult, "description": "Not decided in time; it still will be"},
    **responses(400, 401, 403, 404, 409, 429, 503),
}
HTTP_INTAKE = {"http.request.method": "POST", "http.route": "/jobs"}  # Kafka's intake span, its HTTP way
router = APIRouter(tags=["jobs"])


@router.get(
    "/jobs/{job_id}",
    response_model=JobView,
    responses=READ_ERRORS,
    summary="A job: state, request, attempts, artifacts, totals",
)
async def get_job(job_id: UUID, request: Request, principal: Caller, as_of: AsOf = None) -> Response:
    async def answer(reads: Reads, job: Listed) -> Response:
        own = reads_own_only(principal.role)
        if as_of is None:
            return Response(reads.views.json(job, own), media_type=JSON)
        at = as_utc(as_of)
        then = await reads.costly.run(principal, lambda: state_as_of(kept_history(reads, job_id, at), at))
        if not isinstance(then, Job) and (not isinstance(then, Unaccepted) or then.rejected is None):
            raise ApiError(422, "out_of_history", f"job {job_id} was not yet a job at {as_of.isoformat()}")
        view = reads.views.linked(listed_view(then))
        return Response((own_view(view) if own else view).model_dump_json(), media_type=JSON)

    return await _read(request, job_id, principal, answer)


@router.get(
    "/jobs/{job_id}/events",
    response_model=EventList,
    responses=READ_ERRORS,
    summary="A job's history, in order",
)
async def get_events(job_id: UUID, request: Request, principal: Caller, until: Until = None) -> Response:
    def listed() -> bytes:
        kept = reads_of(request).store.events_of(job_id)
        if until is not None:
            kept = events_until(kept_history(reads_of(request), job_id, until), as_utc(until))
        shown = own_events(kept) if reads_own_only(principal.role) else kept
        events = [event_view(event) for event in shown]
        return EventList(job_id=job_id, items=events).model_dump_json().encode()

    async def answer(reads: Reads, _: Listed) -> Response:
        return Response(await reads.costly.run(principal, listed), media_type=JSON)

    return await _read(request, job_id, principal, answer)


@router.get(
    "/jobs/{job_id}/callbacks",
    response_model=CallbackLog,
    responses=READ_ERRORS,
    summary="A job's callback tries: when each was sent, the receiver's answer, its latency and error",
)
async def get_callbacks(job_id: UUID, request: Request, principal: Caller) -> Response:
    def listed() -> bytes:
        tries = callback_log(reads_of(request).store.events_of(job_id))
        return CallbackLog(job_id=job_id, items=tries).model_dump_json().encode()

    async def answer(reads: Reads, _: Listed) -> Response:
        return Response(await reads.costly.run(principal, listed), media_type=JSON)

    return await _read(request, job_id, principal, answer)


@router.get(
    "/jobs/{job_id}/explain",
    response_model=Explanation,
    responses=READ_ERRORS,
    summary="Why the job is where it is: each decision, with the rule that made it",
)
async def explain_job(job_id: UUID, request: Request, principal: Caller) -> Response:
    def told(reads: Reads, job: Listed) -> bytes:
        state = listed_view(job).state
        events = reads.store.events_of(job_id)
        steps = explain(own_events(events) if reads_own_only(principal.role) else events)
        shown = [StepView.model_validate(step, from_attributes=True) for step in steps]
        return (
            Explanation(job_id=job_id, state=state, why=why(state.value, steps), steps=shown)
            .model_dump_json()
            .encode()
        )

    async def answer(reads: Reads, job: Listed) -> Response:
        return Response(await reads.costly.run(principal, lambda: told(reads, job)), media_type=JSON)

    return await _read(request, job_id, principal, answer)


async def _read(
    request: Request,
    job_id: UUID,
    principal: Principal,
    answer: Callable[[Reads, Listed], Awaitable[Response]],
) -> Response:
    """A read of one job: the owner's answer when another worker keeps it, else `answer` once the
    caller may read the job."""
    reads = reads_of(request)
    forwarded = await reads.forwarded(request, job_id)
    if forwarded is not None:
        return forwarded
    return await answer(reads, await _readable(reads, job_id, request, principal))


@router.post(
    "/jobs",
    response_model=SubmissionResult,
    status_code=201,
    responses={
        200: {"model": SubmissionResult, "description": "Reused: the job already exists"},
        202: {"model": SubmissionResult, "description": "Not decided in time; it still will be"},
        422: {"model": SubmissionResult, "description": "Rejected: `reason` and `detail` say why"},
        **responses(400, 401, 429, 503),
    },
    summary="Submit a job (for services that do not speak Kafka): created, reused or rejected",
)
async def submit(body: SubmitBody, request: Request, principal: Caller) -> Response:
    commands = commands_of(request)
    command = submission(body, principal, commands.principals is not None, request_id(request))
    job_id = submission_identity(command)[0]
    forwarded = await commands.forwarded(request, job_id)
    if forwarded is not None:
        return forwarded
    traced = trace_context.intake(
        trace_context.from_mapping(request.headers),
        "scrapestream intake",
        lambda: trace_context.job_attributes(job_id, command.caller_identity, command.job_type) | HTTP_INTAKE,
    )
    command = trace_context.submitted_in(command, traced)
    command_id = command.command_id or uuid4()
    waiting = asyncio.ensure_future(commands.decisions.decision(command_id, DECISION_TIMEOUT_S))
    try:
        message = outgoing(commands.settings.topic("commands"), job_id, command)
        if traced is not None and trace_context.enabled():  # the lifecycle's decision span continues it
            message = replace(message, headers=traced.headers())
        await commands.publisher.send_all([message])
    except BaseException:
        waiting.cancel()
        raise
    return _submitted(job_id, await waiting)


def submission(body: SubmitBody, principal: Principal, verified: bool, request_id: str = "") -> SubmitJob:
    """The command a body asks for, made by the authenticated principal (its id in their namespace)."""
    return body.command(
        command_id=public_command_id(principal.name, uuid4()),
        submitted_by=principal.name if verified else None,
        submitter_role=principal.role if verified else None,
        request_id=request_id,
    )


def _submitted(job_id: UUID, decided: Decided | None) -> Response:
    if isinstance(decided, JobRejected):
        result = SubmissionResult(
            job_id=decided.job_id, submission="rejected", reason=decided.reason.value, detail=decided.detail
        )
        return Response(result.model_dump_json(), status_code=422, media_type=JSON)
    if isinstance(decided, JobAccepted | SubmissionReused):
        created = isinstance(decided, JobAccepted)
        result = SubmissionResult(job_id=job_id, submission="created" if created else "reused")
        return Response(result.model_dump_json(), status_code=201 if created else 200, media_type=JSON)
    pending = SubmissionResult(job_id=job_id, submission="pending")
    return Response(pending.model_dump_json(), status_code=202, media_type=JSON)


@router.post(
    "/jobs/{job_id}/cancel",
    response_model=MutationResult,
    responses=MUTATION_RESPONSES,
    summary="Cancel a job (its caller, operators, admins)",
)
async def cancel(job_id: UUID, body: MutationBody, request: Request, principal: Caller) -> Response:
    command = CancelJob(job_id=job_id, reason=body.reason, **actor_of(principal, request))
    return await mutate_through_lifecycle(request, command)


@router.post(
    "/jobs/{job_id}/redrive",
    response_model=MutationResult,
    responses=MUTATION_RESPONSES,
    summary="Run a dead-lettered job again with a fresh attempt budget (admins)",
)
async def redrive(job_id: UUID, body: RedriveBody, request: Request, principal: Caller) -> Response:
    command = RedriveJob(
        job_id=job_id,
        reason=body.reason,
        deadline_at=body.deadline_at,
        cache_mode=body.cache_mode,
        **actor_of(principal, request),
    )
    return await mutate_through_lifecycle(request, command)


@router.post(
    "/jobs/{job_id}/replay-callback",
    response_model=MutationResult,
    responses=MUTATION_RESPONSES,
    summary="Deliver a finished job's callback again, with its original webhook-id (operators, admins)",
)
async def replay_callback(job_id: UUID, body: ReplayBody, request: Request, principal: Caller) -> Response:
    commands = commands_of(request)
    forwarded = await commands.forwarded(request, job_id)
    if forwarded is not None:
        return forwarded
    command = replay_command(job_id, body, principal, request)
    job = commands.store.load_job(job_id)
    if job is not None and mutation_refusal(job, command, utc_now()) is None:
        url = body.callback_url or job.accepted.callback_url or ""
        await commands.replay_pacer.turn(urlsplit(url).hostname or "", commands.replay_interval_s())
    return await mutate_through_lifecycle(request, command)


def replay_command(job_id: UUID, body: ReplayBody, principal: Principal, request: Request) -> ReplayCallback:
    return ReplayCallback(
        job_id=job_id, reason=body.reason, callback_url=body.callback_url, **actor_of(principal, request)
    )


@router.post(
    "/jobs/{job_id}/delete-history",
    response_model=MutationResult,
    responses=MUTATION_RESPONSES,
    summary="Delete a finished job's history, keeping its audit records (admins)",
)
async def delete_history(job_id: UUID, body: MutationBody, request: Request, principal: Caller) -> Response:
    command = DeleteJobHistory(job_id=job_id, reason=body.reason, **actor_of(principal, request))
    commands = commands_of(request)
    forwarded = await commands.forwarded(request, job_id)
    if forwarded is not None:
        return forwarded
    job = commands.store.load_job(job_id)
    # A type that owns state outside scrapestream may keep a history; asked only once the lifecycle
    # would let this principal delete it (else the lifecycle refuses, as for any other job).
    if job is not None and mutation_refusal(job, command, utc_now()) is None:
        veto = await history_deletion_veto(commands.job_types.get(job.accepted.job_type), job_id)
        if veto is not None:
            refusal = f"job type {job.accepted.job_type} keeps this history: {veto}"
            target = job_target(job_id)
            await commands.audit(
                principal, request, AuditAction.JOB_HISTORY_DELETE, refusal, target, kind=CONFLICT
            )
            commands.refusals.refused(principal)
            raise ApiError(409, "conflict", refusal)
    return await mutate_through_lifecycle(request, command)


def kept_history(reads: Reads, job_id: UUID, at: datetime, what: str = "job") -> list[Event]:
    """The job's (or monitor's) kept events, when they tell how it was at `at` (else 422, naming
    what is kept)."""
    events = reads.store.events_of(job_id)
    refusal = as_of_refusal(events, as_utc(at), utc_now(), what)
    if refusal is not None:
        raise ApiError(422, "out_of_history", refusal)
    return events


def actor_of(principal: Principal, request: Request) -> dict[str, Any]:
    """Who a mutation is by: the authenticated principal, never the request body."""
    return {
        "command_id": uuid4(),
        "actor_id": principal.name,
        "actor_role": principal.role,
        "request_id": request_id(request),
    }


async def _readable(reads: Reads, job_id: UUID, request: Request, principal: Principal) -> Listed:
    """The job (or rejected submission), when the caller may read it; another service's is answered
    as none at all."""
    reads.refusals.check(principal)
    job = reads.store.load_listed(job_id)
    refusal = None if job is None else job_read_refusal(principal.name, principal.role, owner_of(job))
    if refusal is not None:
        reads.audit_soon(principal, request, AuditAction.JOB_READ, refusal, job_target(job_id))
    if job is None or refusal is not None:
        reads.refusals.refused(principal)  # a missing job counts alike: no count tells them apart
        raise ApiError(404, "not_found", f"no job {job_id}")
    return job


async def mutate_through_lifecycle(request: Request, command: MutationCommand) -> Response:
    """Decided by the job's lifecycle: this worker's, so it can wait for the audit record that ends it."""
    commands = commands_of(request)
    forwarded = await commands.forwarded(request, command.job_id)
    if forwarded is not None:
        return forwarded
    principal = Principal(command.actor_id, command.actor_role)
    commands.refusals.check(principal)
    command_id = command.command_id or uuid4()
    waiting = asyncio.ensure_future(commands.decisions.decision(command_id, DECISION_TIMEOUT_S))
    try:
        await commands.publisher.send_all(
            [outgoing(commands.settings.topic("commands"), command.job_id, command)]
        )
    except BaseException:
        waiting.cancel()
        raise
    audit = await waiting
    if audit is not None and not isinstance(audit, AuditRecorded | RecordAudit):
        raise ApiError(500, "error", f"command {command_id} was decided as a submission")
    if audit is None:
        pending = MutationResult(outcome="PENDING", command_id=command_id, audit=None)
        return Response(pending.model_dump_json(), status_code=202, media_type=JSON)
    if audit.outcome is not AuditOutcome.ALLOWED or not isinstance(audit, AuditRecorded):
        commands.refusals.refused(principal)
        status, code = REFUSALS.get(audit.refusal, (409, "conflict"))
        raise ApiError(status, code, audit.detail)
    done = MutationResult(outcome="ALLOWED", command_id=command_id, audit=audit_view(audit))
    return Response(done.model_dump_json(), media_type=JSON)
