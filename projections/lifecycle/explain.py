"""Why a job is where it is, in plain words: each decision in its events, with the rule that made it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import singledispatch

from projections.lifecycle.attempts import attempt_record_of
from projections.lifecycle.dispatch import dispatch_of
from projections.lifecycle.identity import shown_url
from schemas.enums import AttemptOutcome, ExpiryReason, FailureDisposition
from schemas.events import (
    AttemptRecorded,
    AttemptStarted,
    CallbackAbandoned,
    CallbackDelivered,
    CallbackReplayed,
    CallbackRetryScheduled,
    Event,
    JobAccepted,
    JobCancelled,
    JobDeadLettered,
    JobDispatched,
    JobHistoryDeleted,
    JobRedriven,
    JobRejected,
    JobSucceeded,
    LeaseExpired,
    RetryScheduled,
    StaleReportIgnored,
    SubmissionReused,
)
from schemas.records import Attempt

ROUTE_DENIALS = frozenset({"BUDGET_EXHAUSTED", "RATE_LIMITED", "ROUTE_UNAVAILABLE", "ROUTE_NOT_ALLOWED"})
EXPIRIES = {
    ExpiryReason.EXPIRED: "its executor did not report in time",
    ExpiryReason.NOT_STARTED: "no executor started it within its start window",
    ExpiryReason.BEYOND_HORIZON: "it would have run past the job's deadline",
}


@dataclass(frozen=True)
class Step:
    sequence: int
    at: datetime
    rule: str
    said: str


def explain(events: Sequence[Event]) -> list[Step]:
    """Each event that decided something, said with the rule that decided it, in order."""
    steps = []
    dispatched: dict[int, datetime] = {}
    for event in _told_apart(events):
        if isinstance(event, JobDispatched):
            dispatched[event.attempt_number] = event.occurred_at
        told = _told(event, dispatched)
        if told is not None:
            steps.append(Step(event.sequence, event.occurred_at, *told))
    return steps


def _told_apart(events: Sequence[Event]) -> Iterator[Event]:
    """The events, with the first dispatch an acceptance holds and the attempt a success holds told as
    decisions of their own."""
    for event in events:
        held = attempt_record_of(event) if isinstance(event, JobSucceeded) else None
        if held is not None:
            yield held
        yield event
        first = dispatch_of(event) if isinstance(event, JobAccepted) else None
        if first is not None:
            yield first


def why(state: str, steps: Sequence[Step]) -> str:
    """One sentence: where the job is, and the last decision that put it there."""
    deciding = [step for step in steps if not step.rule.startswith("callback.")] or list(steps)
    if not deciding:
        return f"it is {state}: nothing has been decided yet"
    return f"it is {state} because {deciding[-1].said}"


def _told(event: Event, dispatched: dict[int, datetime]) -> tuple[str, str] | None:
    if isinstance(event, AttemptRecorded):
        return _attempt(event.attempt)
    if isinstance(event, AttemptStarted):
        return _started(event, dispatched)
    if isinstance(event, RetryScheduled):
        return _retry(event)
    return _said(event)


def _started(event: AttemptStarted, dispatched: dict[int, datetime]) -> tuple[str, str]:
    until = event.lease_expires_at.isoformat()
    running = f"an executor is running it; it must report by {until} (its lease is renewed while it runs)"
    waited = (event.occurred_at - dispatched.get(event.attempt_number, event.occurred_at)).total_seconds()
    if waited < 1:
        return "attempt.started", f"attempt {event.attempt_number} started: {running}"
    return (
        "attempt.waited",
        f"attempt {event.attempt_number} started {waited:.1f} s after it was dispatched: it waited for "
        f"an executor place or its host's pacing (one request at a time per host, with a gap); {running}",
    )


@singledispatch
def _said(event: Event) -> tuple[str, str] | None:
    return None  # no decision of its own to tell (a dispatch, a renewal, an audit record)


def _attempt(attempt: Attempt) -> tuple[str, str]:
    number = f"attempt {attempt.attempt_number}"
    if attempt.from_cache:
        stored = "" if attempt.cached_at is None else f" stored at {attempt.cached_at.isoformat()}"
        writer = "" if attempt.cache_entry_job_id is None else f" by job {attempt.cache_entry_job_id}"
        return (
            "cache.answered",
            f"{number} was answered from the cache: the entry{stored}{writer} was still fresh for this job's "
            "cache mode, so no request reached the origin",
        )
    failure = attempt.failure
    if failure is not None and failure.code in ROUTE_DENIALS:
        route = attempt.route_name or attempt.route.value.lower()
        return (
            "route.denied",
            f"{number} was denied by route {route} ({failure.code}): {failure.safe_message}",
        )
    if failure is not None:
        status = "" if attempt.http_status is None else f" (HTTP {attempt.http_status})"
        final = (
            "" if failure.disposition is FailureDisposition.RETRYABLE else "; a final failure, not retried"
        )
        return "attempt.failed", f"{number} failed {failure.code}{status}: {failure.safe_message}{final}"
    if attempt.outcome is AttemptOutcome.NOT_MODIFIED:
        return "cache.revalidated", f"{number}: the origin said the cached copy is still current (HTTP 304)"
    route = attempt.route_name or attempt.route.value.lower()
    return (
        "attempt.fetched",
        f"{number} fetched HTTP {attempt.http_status} via route {route}: {attempt.bytes} bytes in "
        f"{attempt.elapsed_ms} ms",
    )


def _retry(event: RetryScheduled) -> tuple[str, str]:
    failure = event.failure
    at = event.next_attempt_at.isoformat()
    if failure.retry_at is not None and event.next_attempt_at >= failure.retry_at:
        asked = f"the origin's Retry-After asked to wait until {failure.retry_at.isoformat()}"
        # The due time is the later of the two; a second or more past Retry-After is the backoff's.
        longer = event.next_attempt_at - failure.retry_at >= timedelta(seconds=1)
        due = (
            f"the backoff after attempt {event.attempt_number} is longer, so attempt "
            f"{event.attempt_number + 1} is due at {at}"
            if longer
            else f"so attempt {event.attempt_number + 1} is due at {at}"
        )
        return (
            "retry.retry_after",
            f"retried because of {failure.code} ({failure.safe_message}): {asked}; {due}",
        )
    return (
        "retry.backoff",
        f"retried because of {failure.code} ({failure.safe_message}): attempt {event.attempt_number + 1} is "
        f"due at {at}, after exponential backoff with jitter",
    )


@_said.register
def _accepted(event: JobAccepted) -> tuple[str, str] | None:
    return (
        "submission.accepted",
        f"accepted for {event.caller_identity}: {event.job_type}, up to {event.attempt_limit} attempts "
        f"before {event.deadline_at.isoformat()}, cache mode {event.cache_mode}",
    )


@_said.register
def _rejected(event: JobRejected) -> tuple[str, str] | None:
    return f"submission.rejected.{event.reason.value.lower()}", f"rejected {event.reason}: {event.detail}"


@_said.register
def _dispatched(event: JobDispatched) -> tuple[str, str] | None:
    return (
        "attempt.dispatched",
        f"attempt {event.attempt_number} was handed to the executors of its job type; unless one starts "
        f"and reports it by {event.lease_expires_at.isoformat()}, its lease lapses and it is handed out "
        "again: if no attempt starts, see that a running worker runs its type (GET /job-types)",
    )


@_said.register
def _reused(event: SubmissionReused) -> tuple[str, str] | None:
    return (
        "submission.reused",
        f"a later submission by {event.caller_identity} with the same idempotency key reused this job "
        "instead of making another",
    )


@_said.register
def _expired(event: LeaseExpired) -> tuple[str, str] | None:
    why = EXPIRIES.get(event.reason, event.reason.value)
    return "lease.expired", f"attempt {event.attempt_number}'s lease ended: {why} ({event.failure.code})"


@_said.register
def _succeeded(event: JobSucceeded) -> tuple[str, str] | None:
    return (
        "job.succeeded",
        f"succeeded with attempt {event.attempt_number} ({len(event.artifacts)} artifacts)",
    )


@_said.register
def _dead(event: JobDeadLettered) -> tuple[str, str] | None:
    failure = event.failure
    return "job.dead_lettered", f"dead-lettered, not retried: {failure.code}: {failure.safe_message}"


@_said.register
def _cancelled(event: JobCancelled) -> tuple[str, str] | None:
    return "job.cancelled", f"cancelled by {event.actor_id} ({event.actor_role}): {event.reason}"


@_said.register
def _redriven(event: JobRedriven) -> tuple[str, str] | None:
    return (
        "job.redriven",
        f"redriven by {event.actor_id} ({event.actor_role}): {event.reason}; a fresh attempt budget, "
        f"deadline {event.deadline_at.isoformat()}",
    )


@_said.register
def _deleted(event: JobHistoryDeleted) -> tuple[str, str] | None:
    return "job.history_deleted", f"history deleted by {event.actor_id} ({event.actor_role}): {event.reason}"


@_said.register
def _stale(event: StaleReportIgnored) -> tuple[str, str] | None:
    return "report.stale", "a report for a lease that is no longer the job's was ignored"


@_said.register
def _callback_replayed(event: CallbackReplayed) -> tuple[str, str] | None:
    return (
        "callback.replayed",
        f"callback {event.webhook_id} replayed to {shown_url(event.callback_url)} by {event.actor_id} "
        f"({event.actor_role}): {event.reason}",
    )


@_said.register
def _callback_retry(event: CallbackRetryScheduled) -> tuple[str, str] | None:
    return (
        "callback.retry",
        f"callback try {event.attempt_number} failed ({event.last_error}); "
        f"the next try is due at {event.next_attempt_at.isoformat()}",
    )


@_said.register
def _callback_delivered(event: CallbackDelivered) -> tuple[str, str] | None:
    return (
        "callback.delivered",
        f"callback delivered to {shown_url(event.callback_url)} (HTTP {event.http_status}) "
        f"after {event.delivery_attempts} tries",
    )


@_said.register
def _callback_abandoned(event: CallbackAbandoned) -> tuple[str, str] | None:
    return (
        "callback.abandoned",
        f"callback to {shown_url(event.callback_url)} abandoned after {event.delivery_attempts} tries: "
        f"{event.last_error}",
    )
