"""Callback delivery rules: one try at a time, retries scheduled durably as events, bounded in total.

A try that is not reported within its timeout (plus grace) counts as failed, so a lost
outbox record cannot leave a callback pending forever.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from projections.lifecycle.limits import clip
from projections.lifecycle.policy import Policy
from projections.lifecycle.state import PendingCallback, updated
from schemas.commands import ReportCallback
from schemas.events import CallbackAbandoned, CallbackDelivered, CallbackDispatched, CallbackRetryScheduled
from schemas.work import CallbackDue

if TYPE_CHECKING:
    from projections.lifecycle.emit import Emitter

LOST_TRY_ERROR = "no report from the outbox within the try's timeout"


def start_callback(due: CallbackDue, at: datetime) -> PendingCallback:
    return PendingCallback(due=due, first_dispatched_at=at, attempt_number=1, dispatched_at=at)


def update_callback(
    callbacks: tuple[PendingCallback, ...], event: CallbackDispatched | CallbackRetryScheduled
) -> tuple[PendingCallback, ...]:
    def advanced(pending: PendingCallback) -> PendingCallback:
        if isinstance(event, CallbackDispatched):
            return updated(
                pending,
                attempt_number=event.attempt_number,
                dispatched_at=event.occurred_at,
                next_attempt_at=None,
            )
        return updated(
            pending, dispatched_at=None, next_attempt_at=event.next_attempt_at, last_error=event.last_error
        )

    return tuple(advanced(p) if _matches(p, event.webhook_id) else p for p in callbacks)


def finish_callback(callbacks: tuple[PendingCallback, ...], webhook_id: str) -> tuple[PendingCallback, ...]:
    match = next((p for p in callbacks if _matches(p, webhook_id)), None)
    return tuple(p for p in callbacks if p is not match)


def _matches(pending: PendingCallback, webhook_id: str) -> bool:
    return webhook_id in ("", pending.webhook_id)  # "" is a report written before webhook ids existed


def try_deadline(pending: PendingCallback, policy: Policy) -> datetime | None:
    """When an unreported try counts as lost."""
    if pending.dispatched_at is None:
        return None
    return pending.dispatched_at + timedelta(
        milliseconds=policy.callbacks.attempt_timeout_ms + policy.lease_grace_ms
    )


def next_callback_timer(callbacks: tuple[PendingCallback, ...], policy: Policy) -> datetime | None:
    times = [p.next_attempt_at or try_deadline(p, policy) for p in callbacks]
    return min((t for t in times if t is not None), default=None)


def report_callback(
    callbacks: tuple[PendingCallback, ...], command: ReportCallback, emit: Emitter, policy: Policy
) -> None:
    """A report about the try in flight ends the delivery, or schedules the next try."""
    pending = next((p for p in callbacks if _matches(p, command.webhook_id)), None)
    if pending is None or pending.dispatched_at is None:
        return
    if command.attempt_number not in (0, pending.attempt_number):
        return  # a report about an earlier try
    if command.delivered:
        emit(
            CallbackDelivered,
            callback_url=pending.due.callback_url,
            delivery_attempts=pending.attempt_number,
            http_status=command.http_status or 200,
            webhook_id=pending.webhook_id,
        )
        return
    error = clip(command.last_error or "unknown")
    status = (
        command.http_status if command.http_status is not None and 100 <= command.http_status <= 599 else None
    )
    _retry_or_abandon(pending, error, command.retryable, emit, policy, status)


def check_callbacks(callbacks: tuple[PendingCallback, ...], emit: Emitter, policy: Policy) -> None:
    """Dispatch the tries that are due; count unreported tries past their timeout as failed."""
    for pending in callbacks:
        if pending.next_attempt_at is not None and emit.now >= pending.next_attempt_at:
            emit(CallbackDispatched, webhook_id=pending.webhook_id, attempt_number=pending.attempt_number + 1)
            continue
        deadline = try_deadline(pending, policy)
        if deadline is not None and emit.now >= deadline:
            _retry_or_abandon(pending, LOST_TRY_ERROR, True, emit, policy)


def _retry_or_abandon(
    pending: PendingCallback,
    error: str,
    retryable: bool,
    emit: Emitter,
    policy: Policy,
    http_status: int | None = None,
) -> None:
    rules = policy.callbacks
    next_attempt_at = emit.now + rules.backoff(pending.attempt_number)
    give_up_at = pending.first_dispatched_at + timedelta(milliseconds=rules.max_elapsed_ms)
    if retryable and pending.attempt_number < rules.max_attempts and next_attempt_at <= give_up_at:
        emit(
            CallbackRetryScheduled,
            webhook_id=pending.webhook_id,
            attempt_number=pending.attempt_number,
            next_attempt_at=next_attempt_at,
            last_error=error,
            http_status=http_status,
        )
        return
    emit(
        CallbackAbandoned,
        callback_url=pending.due.callback_url,
        delivery_attempts=pending.attempt_number,
        last_error=error,
        webhook_id=pending.webhook_id,
        http_status=http_status,
    )


def first_try(callbacks: tuple[PendingCallback, ...], webhook_id: str) -> list[CallbackDue]:
    """The first try of the delivery `webhook_id` names, while it is pending."""
    return [p.due for p in callbacks if p.webhook_id == webhook_id and p.attempt_number == 1]
