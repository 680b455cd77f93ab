"""The outbox agent: makes one try at each due callback and reports how it went.

A record counts as processed once its try is under way; a try lost to a crash is noticed by the
lifecycle (no report within the try's timeout) and retried from there.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from uuid import uuid5

from opentelemetry.trace import SpanKind

from schemas.codec import decode_as
from schemas.commands import ReportCallback
from schemas.types import uuid_text
from schemas.work import CallbackDue
from streams.agents.attempt_spans import address_attributes
from streams.agents.slots import Slots
from streams.callbacks.sender import CallbackSender, TryResult
from streams.runtime import trace_context
from streams.runtime.commit_order import OUTSIDE, Batch
from streams.runtime.consumer import QuietStage, Record
from streams.runtime.deadinput import DeadLetters
from streams.runtime.flusher import Flusher
from streams.runtime.handover import Handover
from streams.runtime.metrics import Metrics
from streams.runtime.publisher import Sink
from streams.runtime.trace_context import TraceContext
from streams.settings import Settings

log = logging.getLogger(__name__)


class Outbox(QuietStage):
    name = "outbox"
    commit_each_batch = True

    def __init__(
        self,
        settings: Settings,
        sender: CallbackSender,
        publisher: Sink,
        dead_letters: DeadLetters,
        clock: Callable[[], datetime],
        metrics: Metrics | None = None,
        counters: Counter[str] | None = None,
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self._sender = sender
        self._publisher = publisher
        self.reports = Handover(Flusher(publisher), "commands", counters)
        self._dead = dead_letters
        self._clock = clock
        self._slots = Slots(settings.outbox_concurrency)
        self.max_batch = settings.outbox_concurrency
        self.topics = frozenset({settings.topic("outbox")})

    def capacity(self) -> int:
        return self._slots.free()

    async def settled(self) -> None:
        await self._slots.idle()

    async def wait_capacity(self) -> None:
        await self._slots.wait_free()

    async def handle(self, records: Sequence[Record], batch: Batch = OUTSIDE) -> None:
        usable, dead = self._dead.sort_out(records, _due_of, "callback")
        for record, due in usable:
            self._slots.start(self._deliver(due, trace_context.from_headers(record.headers)))
        if dead:
            await self._publisher.send_all(dead, batch)

    async def _deliver(self, due: CallbackDue, parent: TraceContext | None) -> None:
        trace_context.working_on(due.job_id, parent)  # this task's log lines name both
        attributes = (
            callback_attributes(due) if parent is not None and trace_context.sampled(parent) else None
        )
        with trace_context.span("scrapestream callback", parent, SpanKind.CLIENT, attributes) as opened:
            tried_in = trace_context.context_of(opened, parent)
            result = await self._sender.attempt(due, tried_in)
            if result.http_status is not None:
                trace_context.set_attributes(opened, {"http.response.status_code": result.http_status})
            if not result.delivered:
                trace_context.failed(opened, result.error or "not delivered")
        if self._metrics is not None:
            self._metrics.callbacks.labels("delivered" if result.delivered else "failed").inc()
        if not result.delivered:
            log.info("callback %s try %d failed: %s", due.webhook_id, due.attempt_number, result.error)
        await self._report(due, result, tried_in if opened is not None else None)

    async def _report(self, due: CallbackDue, result: TryResult, tried_in: TraceContext | None) -> None:
        delivery = due.webhook_id if due.replay == 0 else f"{due.webhook_id}:replay-{due.replay}"
        report = ReportCallback(
            command_id=uuid5(due.job_id, f"callback:{delivery}:{due.attempt_number}"),
            job_id=due.job_id,
            webhook_id=due.webhook_id,
            attempt_number=due.attempt_number,
            delivered=result.delivered,
            retryable=result.retryable,
            delivery_attempts=due.attempt_number,
            http_status=result.http_status,
            last_error=result.error,
        )
        key = uuid_text(due.job_id).encode()
        what = f"the report of callback {due.webhook_id}"
        headers = () if tried_in is None else tried_in.headers()
        await self.reports.deliver(
            self._settings.topic("commands"), key, report, self._clock(), what, headers
        )

    async def close(self) -> None:
        await self._slots.close(self._settings.shutdown_grace_s)
        await self.reports.close()


def callback_attributes(due: CallbackDue) -> dict[str, str | int]:
    """A try's span: the receiver's address without its path, query or credentials."""
    return {
        "scrapestream.job.id": str(due.job_id),
        "scrapestream.webhook.id": due.webhook_id,
        "scrapestream.callback.try": due.attempt_number,
        "http.request.method": "POST",
        **address_attributes(due.callback_url, with_path=False),
    }


def _due_of(record: Record) -> CallbackDue:
    return decode_as(record.value or b"", CallbackDue)
