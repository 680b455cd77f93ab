"""W3C trace context on a job's records and requests, and the spans a stage opens under it.

A job keeps one context from intake on (`JobAccepted.traceparent`). While tracing is on
(`streams.runtime.tracing`) every record of the job carries the context of the span that published
it as the `traceparent` and `tracestate` headers; while it is off no span is opened (`span` yields
None at the cost of one test) and only the completion and the callback carry the job's context.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, TraceFlags, TraceState
from opentelemetry.trace.status import Status, StatusCode

from projections.lifecycle.submission import MAX_TRACESTATE_CHARS
from schemas.commands import SubmitJob
from streams.broker.headers import Headers

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
MAX_TRACEPARENT_CHARS = 256  # a later version's may be longer than 00's 55; no sane one is this long
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[^ ]*)?")
_NO_TRACE = "0" * 32
_NO_SPAN = "0" * 16
Attributes = Mapping[str, str | int | float | bool]


@dataclass(frozen=True)
class TraceContext:
    """Where a span sits: its trace, its own id, whether it is sampled, and the vendors' state."""

    trace_id: str
    span_id: str
    sampled: bool
    state: str = ""

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{'01' if self.sampled else '00'}"

    @functools.cached_property
    def encoded(self) -> Headers:
        parent = ((TRACEPARENT, self.traceparent.encode()),)
        return (*parent, (TRACESTATE, self.state.encode())) if self.state else parent

    def headers(self) -> Headers:
        """As Kafka headers: written once for a context however many records carry it."""
        return self.encoded


def parsed(traceparent: str | bytes | None, tracestate: str | bytes | None = None) -> TraceContext | None:
    """The context a W3C `traceparent` names; None for a missing or malformed one (W3C: ignore it)."""
    if traceparent is None or len(traceparent) > MAX_TRACEPARENT_CHARS:
        return None
    text = traceparent.decode("ascii", "replace") if isinstance(traceparent, bytes) else traceparent
    found = _TRACEPARENT.fullmatch(text.strip())
    if found is None:
        return None
    version, trace_id, span_id, flags, rest = found.groups()
    if version == "ff" or (version == "00" and rest) or trace_id == _NO_TRACE or span_id == _NO_SPAN:
        return None
    state = tracestate.decode("ascii", "replace") if isinstance(tracestate, bytes) else tracestate or ""
    # HTTP headers (a callback's) take printable ASCII only: anything else would fail every try.
    usable = len(state) <= MAX_TRACESTATE_CHARS and state.isascii() and state.isprintable()
    state = state.strip() if usable else ""
    return TraceContext(trace_id, span_id, bool(int(flags, 16) & 1), state)


def from_headers(headers: Headers | None) -> TraceContext | None:
    found = dict(headers or ())
    return _parsed_once(found.get(TRACEPARENT), found.get(TRACESTATE))


@functools.lru_cache(maxsize=4096)
def _parsed_once(traceparent: bytes | None, tracestate: bytes | None) -> TraceContext | None:
    return parsed(traceparent, tracestate)  # the records of one job repeat the same headers


def from_mapping(headers: Mapping[str, str]) -> TraceContext | None:
    """From HTTP request headers (any case)."""
    return parsed(headers.get(TRACEPARENT), headers.get(TRACESTATE))


_working: ContextVar[str] = ContextVar("scrapestream_working_on", default="")
_tracer: trace.Tracer | None = None  # set while the SDK exports (streams.runtime.tracing)
_follows_parent = True  # the sampler keeps a span exactly when its parent was kept (parent-based)
MIN_WAIT_NS = 1_000_000  # a wait shorter than a millisecond is not worth a span


def enabled() -> bool:
    return _tracer is not None


def use_tracer(tracer: trace.Tracer | None, follows_parent: bool = True) -> None:
    global _tracer, _follows_parent
    _tracer, _follows_parent = tracer, follows_parent


def sampled(parent: TraceContext) -> bool:
    """Whether a span under `parent` may be sampled."""
    return _tracer_for(parent) is not None


def _tracer_for(parent: TraceContext | None) -> trace.Tracer | None:
    """The tracer when a span under `parent` (None: the current span) may be sampled: a trace the
    sampler dropped costs no span at all below its first."""
    tracer = _tracer
    if tracer is None or not _follows_parent:
        return tracer
    if parent is not None:
        return tracer if parent.sampled else None
    current = trace.get_current_span().get_span_context()
    return tracer if current.is_valid and current.trace_flags.sampled else None


@contextlib.contextmanager
def span(
    name: str,
    parent: TraceContext | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Attributes | None = None,
    root: bool = False,
) -> Iterator[Span | None]:
    """A span current for the block, under `parent` (None: under the current span, if any, or with
    `root` a new trace's first); None while off, or when the trace is not sampled."""
    tracer = _tracer if parent is None and root else _tracer_for(parent)
    if tracer is None:
        yield None
        return
    context = None if parent is None else _remote(parent)
    with tracer.start_as_current_span(name, context, kind, attributes) as opened:
        yield opened


def started(
    name: str,
    parent: TraceContext | None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Attributes | None = None,
    at: datetime | None = None,
    at_ns: int | None = None,
) -> Span | None:
    """A span its caller ends (`Span.end`), not made current, under `parent` (None: the current
    span); None while off or not sampled."""
    tracer = _tracer_for(parent)
    if tracer is None:
        return None
    context = None if parent is None else _remote(parent)
    return tracer.start_span(name, context, kind, attributes, start_time=_ns(at) if at_ns is None else at_ns)


def waited(
    name: str, parent: TraceContext | None, since: datetime, until: datetime, attributes: Attributes
) -> None:
    """A span that stands for a wait already over (a retry's backoff, queued due work)."""
    opened = started(name, parent, attributes=attributes, at=since)
    if opened is not None:
        opened.end(_ns(until))


@contextlib.contextmanager
def waiting(name: str, kind: str) -> Iterator[None]:
    """A wait within the current span, recorded as a span of its own only if it lasted."""
    if _tracer_for(None) is None:
        yield
        return
    since = time.time_ns()
    yield
    until = time.time_ns()
    if until - since >= MIN_WAIT_NS:
        opened = started(name, None, attributes={"scrapestream.wait": kind}, at_ns=since)
        if opened is not None:
            opened.end(until)


def context_of(opened: Span | None, parent: TraceContext | None) -> TraceContext | None:
    """What a record published under `opened` carries: its span's context, else its parent's."""
    if opened is None:
        return parent
    found = opened.get_span_context()
    if not found.is_valid:
        return parent
    state = parent.state if parent is not None else ""
    return TraceContext(
        format(found.trace_id, "032x"), format(found.span_id, "016x"), found.trace_flags.sampled, state
    )


def set_attributes(opened: Span | None, attributes: Mapping[str, Any]) -> None:
    if opened is not None and opened.is_recording():
        opened.set_attributes({key: value for key, value in attributes.items() if value is not None})


def _remote(parent: TraceContext) -> Any:
    flags = TraceFlags(TraceFlags.SAMPLED if parent.sampled else TraceFlags.DEFAULT)
    state = TraceState.from_header([parent.state]) if parent.state else None
    context = SpanContext(int(parent.trace_id, 16), int(parent.span_id, 16), True, flags, state)
    return trace.set_span_in_context(NonRecordingSpan(context))


def _ns(at: datetime | None) -> int | None:
    return None if at is None else int(at.timestamp() * 1_000_000_000)


def intake(
    incoming: TraceContext | None, name: str, attributes: Callable[[], Attributes]
) -> TraceContext | None:
    """The context a new command of a job goes on with: an intake span's under the producer's (or a
    new trace's); while tracing is off, the producer's own, if any (no trace is made up then, and
    no attributes are made)."""
    if not enabled():
        return incoming
    with span(name, incoming, SpanKind.CONSUMER, attributes(), root=True) as opened:
        return context_of(opened, incoming)


def job_attributes(job_id: UUID, caller: str, job_type: str) -> dict[str, str]:
    return {
        "scrapestream.job.id": str(job_id),
        "scrapestream.caller": caller,
        "scrapestream.job.type": job_type,
    }


def submitted_in(command: SubmitJob, traced: TraceContext | None) -> SubmitJob:
    """The submission in the trace it goes on in: from intake, never from what its body says."""
    if traced is None:
        return (
            command
            if command.traceparent is None and command.tracestate is None
            else msgspec.structs.replace(command, traceparent=None, tracestate=None)
        )
    return msgspec.structs.replace(command, traceparent=traced.traceparent, tracestate=traced.state or None)


def working_on(job_id: UUID, context: TraceContext | None) -> None:
    """The log lines of the calling task from here on name the job and its trace."""
    _working.set(f" job={job_id}" + ("" if context is None else f" trace={context.trace_id}"))


def working() -> str:
    return _working.get()


def failed(opened: Span | None, description: str) -> None:
    if opened is not None and opened.is_recording():
        opened.set_status(Status(StatusCode.ERROR, description))
