"""The lifecycle's spans: one for each decided command of a job, under its record's context or the
job's, naming the rule that decided and the job's state after; the retry backoff a dispatch ends;
the completion it publishes. What the decision publishes carries the decision's context."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from opentelemetry.trace import Span, SpanKind

from projections.lifecycle.state import State, accepted_job
from schemas.commands import Command
from schemas.events import (
    Event,
    JobAccepted,
    JobDeadLettered,
    JobDispatched,
    JobRejected,
    LeaseExpired,
    RetryScheduled,
)
from streams.runtime.publisher import Outgoing
from streams.runtime.trace_context import (
    TraceContext,
    context_of,
    enabled,
    job_attributes,
    parsed,
    sampled,
    span,
    started,
    waited,
)

UNTRACED_TOPIC_KINDS = (".cache", ".references")  # shared by many jobs: none of them carries a trace


def job_trace(accepted: JobAccepted) -> TraceContext | None:
    return _trace_of(accepted.traceparent, accepted.tracestate)


@functools.lru_cache(maxsize=4096)
def _trace_of(traceparent: str | None, tracestate: str | None) -> TraceContext | None:
    return parsed(traceparent, tracestate)


def carried(message: Outgoing, context: TraceContext | None) -> Outgoing:
    return message if context is None else replace(message, headers=(*message.headers, *context.headers()))


@dataclass(frozen=True)
class Traced:
    """A decision's context (None: the job has none), and its span while tracing is on."""

    context: TraceContext | None
    opened: Span | None
    spans: bool = False  # the trace is recorded: every record of the job carries its context

    def carrying(self, messages: Sequence[Outgoing], leaving: tuple[str, str]) -> list[Outgoing]:
        """The decision's records, each with the context it goes on in: a completion under a span
        of its own, which a consumer of completions continues. With tracing off, or for a trace the
        sampler dropped, only what leaves the deployment (`leaving`: the completions and the
        callbacks) carries it: no span inside would be made under it."""
        if self.context is None:
            return list(messages)
        completions = leaving[0]
        if not self.spans:
            return [carried(m, self.context) if m.topic in leaving else m for m in messages]
        carrying = []
        for message in messages:
            if message.topic.endswith(UNTRACED_TOPIC_KINDS):
                carrying.append(message)
            elif message.topic == completions:
                carrying.append(carried(message, self._completion(message)))
            else:
                carrying.append(carried(message, self.context))
        return carrying

    def _completion(self, message: Outgoing) -> TraceContext | None:
        attributes = {"messaging.system": "kafka", "messaging.destination.name": message.topic}
        opened = started("scrapestream completion", self.context, SpanKind.PRODUCER, attributes)
        if opened is not None:
            opened.end()
        return context_of(opened, self.context)


@contextlib.contextmanager
def decision_span(
    command: Command, events: Sequence[Event], after: State, parent: TraceContext | None
) -> Iterator[Traced]:
    if parent is None or not enabled():
        yield Traced(parent, None)
        return
    if not sampled(parent):  # no span below a dropped one; only what leaves carries the context
        yield Traced(parent, None)
        return
    job = accepted_job(after)
    attributes = {
        "scrapestream.command": type(command).__name__,
        "scrapestream.rule": rule_of(events),
        "scrapestream.events": ",".join(type(event).__name__ for event in events),
    }
    if job is not None:
        accepted = job.accepted
        attributes |= job_attributes(job.job_id, accepted.caller_identity, accepted.job_type)
        attributes["scrapestream.job.state"] = job.status.value
    with span(f"scrapestream decide {type(command).__name__}", parent, attributes=attributes) as opened:
        context = context_of(opened, parent)
        if opened is not None and job is not None:
            _waits(events, after, context)
        yield Traced(context, opened, spans=True)


def rule_of(events: Sequence[Event]) -> str:
    """What decided, in a word or two: the last event, with why a job failed or was refused."""
    if not events:
        return "unchanged"  # a repeated or stale command
    last = events[-1]
    if isinstance(last, JobRejected):
        return f"rejected: {last.reason.value}"
    if isinstance(last, RetryScheduled | JobDeadLettered | LeaseExpired):
        return f"{type(last).__name__}: {last.failure.code}"
    return type(last).__name__


def _waits(events: Sequence[Event], after: State, context: TraceContext | None) -> None:
    """A dispatch after a failed attempt ends its retry backoff: a span from that attempt's end."""
    job = accepted_job(after)
    if job is None:
        return
    for event in events:
        if not isinstance(event, JobDispatched) or event.attempt_number < 2:
            continue
        before = [a for a in job.attempts if a.attempt_number == event.attempt_number - 1]
        if before and before[-1].finished_at < event.occurred_at:
            number: dict[str, str | int] = {"scrapestream.attempt.number": event.attempt_number}
            name = "scrapestream wait retry_backoff"
            waited(name, context, before[-1].finished_at, event.occurred_at, number)
