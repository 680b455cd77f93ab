"""Trace context: W3C headers read strictly, kept in the job, never trusted beyond their size; the SDK
set up only from its standard environment, its export queue bounded and its losses counted."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased

from projections.lifecycle.decide import decide
from projections.views import trace_id_of
from schemas.events import JobAccepted
from streams.agents.attempt_spans import address_attributes
from streams.agents.decision_spans import Traced, rule_of
from streams.runtime import trace_context, tracing
from streams.runtime.publisher import Outgoing
from streams.runtime.trace_context import TraceContext, from_headers, parsed
from tests.lifecycle import POLICY, T0, submit

HEX = "0123456789abcdef"
ids = st.text(HEX, min_size=32, max_size=32).filter(lambda text: text != "0" * 32)
span_ids = st.text(HEX, min_size=16, max_size=16).filter(lambda text: text != "0" * 16)


@given(ids, span_ids, st.booleans())
def test_a_context_reads_back_from_the_headers_it_writes(trace_id, span_id, sampled):
    context = TraceContext(trace_id, span_id, sampled, "team=blue")
    assert from_headers(context.headers()) == context
    assert trace_id_of(context.traceparent) == trace_id


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "garbage",
        "00-" + "0" * 32 + "-00f067aa0ba902b7-01",  # no trace
        "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01",  # no parent span
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # a version never valid
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  # version 00 has four parts
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # short
        b"\xff\xfe-not-ascii",
    ],
)
def test_a_malformed_traceparent_is_no_context(header):
    assert parsed(header) is None


def test_a_later_version_is_read_for_what_version_00_defines():
    found = parsed("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-future")
    assert found == TraceContext("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", True)


def test_an_oversized_or_unprintable_tracestate_is_dropped_and_the_parent_kept():
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
    assert parsed(traceparent, "a=" + "b" * 600) == TraceContext(
        "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", False
    )
    assert parsed(traceparent, "a=b\nc=d").state == ""  # type: ignore[union-attr]
    assert parsed(traceparent, "a=\u00e9t\u00e9").state == ""  # type: ignore[union-attr]  # not ASCII: no HTTP header
    assert parsed(traceparent, b"a=\xff").state == ""  # type: ignore[union-attr]


def test_the_lifecycle_keeps_the_submissions_trace_and_nothing_longer_than_w3c_allows():
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    (accepted, *_) = decide(None, submit(traceparent=traceparent, tracestate="x=1"), T0, POLICY)
    assert isinstance(accepted, JobAccepted)
    assert (accepted.traceparent, accepted.tracestate) == (traceparent, "x=1")
    (hostile, *_) = decide(None, submit(traceparent="0" * 10_000, tracestate="s" * 10_000), T0, POLICY)
    assert isinstance(hostile, JobAccepted)
    assert (hostile.traceparent, hostile.tracestate) == (None, None)
    assert trace_id_of("0" * 10_000) is None


def test_intake_sets_a_submissions_trace_from_its_context_whatever_the_body_said():
    command = submit(traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01", tracestate="forged=1")
    assert trace_context.intake(None, "intake", dict) is None  # tracing off, none came: none made up
    untraced = trace_context.submitted_in(command, None)
    assert (untraced.traceparent, untraced.tracestate) == (None, None)
    given_context = parsed("00-" + "c" * 32 + "-" + "d" * 16 + "-01", "k=v")
    assert given_context is not None
    assert trace_context.intake(given_context, "intake", dict) == given_context
    kept = trace_context.submitted_in(command, given_context)
    assert (kept.traceparent, kept.tracestate) == (given_context.traceparent, "k=v")


def test_the_rule_names_why_a_job_failed_or_nothing_changed():
    assert rule_of([]) == "unchanged"


def test_tracing_is_off_unless_an_exporter_is_named_and_refuses_what_it_does_not_know(monkeypatch):
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_BSP_MAX_QUEUE_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert not tracing.configure()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert not tracing.configure()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not tracing.configure()
    monkeypatch.delenv("OTEL_SDK_DISABLED")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "jaeger")
    with pytest.raises(tracing.TracingError, match="jaeger"):
        tracing.configure()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "many")
    with pytest.raises(tracing.TracingError, match="OTEL_BSP_MAX_QUEUE_SIZE"):
        tracing.configure()
    assert not trace_context.enabled()
    with trace_context.span("off") as opened:
        assert opened is None


class StuckCollector(SpanExporter):
    """A collector that takes every batch and answers only when let go."""

    def __init__(self) -> None:
        self.let_go = threading.Event()
        self.batches: list[int] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.let_go.wait(10)
        self.batches.append(len(spans))
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.let_go.set()


@pytest.fixture
def stuck() -> Iterator[tuple[TracerProvider, StuckCollector]]:
    collector = StuckCollector()
    provider = TracerProvider()
    provider.add_span_processor(tracing.BoundedExport(collector, max_queue=4, max_batch=2, delay_s=0.01))
    try:
        yield provider, collector
    finally:
        provider.shutdown()


def test_a_stuck_collector_drops_and_counts_spans_and_never_holds_the_caller(stuck):
    provider, collector = stuck
    tracer = provider.get_tracer("test")
    counts = dict(tracing._spans)
    for n in range(50):  # each returns at once though nothing leaves the queue
        with tracer.start_as_current_span(f"span {n}"):
            pass
    dropped = tracing._spans["dropped"] - counts.get("dropped", 0)
    assert dropped >= 50 - 4 - 2  # the queue holds four, the exporter has a batch of two in hand
    collector.let_go.set()
    assert provider.force_flush(5_000)
    assert tracing._spans["failed"] - counts.get("failed", 0) == 50 - dropped


@pytest.fixture
def recorded() -> Iterator[InMemorySpanExporter]:
    """Spans made through `trace_context` while a parent-based sampler keeps every new trace."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(ALWAYS_ON))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace_context.use_tracer(provider.get_tracer("test"), follows_parent=True)
    try:
        yield exporter
    finally:
        trace_context.use_tracer(None)
        provider.shutdown()


def test_a_dropped_trace_costs_no_span_below_its_first_and_goes_on_as_it_came(recorded):
    dropped = TraceContext("a" * 32, "b" * 16, False)
    with trace_context.span("under a dropped parent", dropped) as opened:
        assert opened is None
        assert trace_context.context_of(opened, dropped) == dropped
        with trace_context.span("nested") as inner:
            assert inner is None  # no current span to hang it on: not a new trace either
    kept = TraceContext("c" * 32, "d" * 16, True, "k=v")
    with trace_context.span("under a kept parent", kept) as opened:
        with trace_context.span("nested"), trace_context.waiting("a wait", "politeness"):
            pass  # too short for a span of its own
        carried = trace_context.context_of(opened, kept)
    with trace_context.span("a new trace", root=True) as root:
        assert root is not None
    with trace_context.span("no parent, not a root") as none:
        assert none is None
    with trace_context.span("again", root=True) as root:
        assert root is not None
    names = {span.name: span for span in recorded.get_finished_spans()}
    assert set(names) == {"under a kept parent", "nested", "a new trace", "again"}
    assert carried is not None
    assert carried.trace_id == kept.trace_id
    assert carried.state == "k=v"
    assert names["nested"].parent.span_id == int(carried.span_id, 16)  # type: ignore[union-attr]
    assert names["a new trace"].parent is None


def test_a_decision_without_a_recorded_span_sends_its_context_only_out_of_the_deployment():
    context = TraceContext("a" * 32, "b" * 16, False)
    messages = [Outgoing(topic, b"k", b"v") for topic in ("p.completions", "p.outbox", "p.due", "p.events")]
    carrying = Traced(context, None).carrying(messages, ("p.completions", "p.outbox"))
    assert [from_headers(m.headers) for m in carrying] == [context, context, None, None]
    everywhere = Traced(context, None, spans=True).carrying(messages[1:], ("p.completions", "p.outbox"))
    assert all(from_headers(m.headers) == context for m in everywhere)


@pytest.mark.parametrize(
    "url", ["http://[::1/x", "http://host:99999/x", "http://user:pw@host:8080/p?token=s#f", "not a url"]
)
def test_a_span_names_where_a_request_goes_without_its_secrets_and_never_fails_on_a_url(url):
    found = address_attributes(url, with_path=True)
    assert "token" not in str(found)
    assert "pw" not in str(found)
    if url.startswith("http://user"):
        assert found["url.full"] == "http://host:8080/p"


def test_a_stopping_exporter_leaves_at_once_though_its_wait_for_spans_is_long():
    collector = StuckCollector()
    collector.let_go.set()
    processor = tracing.BoundedExport(collector, max_queue=4, max_batch=2, delay_s=3_600)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    with provider.get_tracer("test").start_as_current_span("the last span"):
        pass
    provider.shutdown()
    assert not processor._thread.is_alive()  # it did not sleep out its hour
    assert collector.batches == [1]  # and what was queued left first
