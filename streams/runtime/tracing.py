"""Tracing with the OpenTelemetry SDK, set up from its standard environment, off by default.

`OTEL_TRACES_EXPORTER` names the exporters (`otlp` over HTTP/protobuf, `zipkin`, `console`; `none`,
the default, keeps tracing off), and the SDK reads the rest itself: `OTEL_SERVICE_NAME`,
`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and its argument, `OTEL_EXPORTER_OTLP_*`,
`OTEL_EXPORTER_ZIPKIN_*`. Finished spans wait in one bounded queue (`OTEL_BSP_MAX_QUEUE_SIZE`) for a
thread that exports them in batches: a full queue drops the span and a failed export drops its
batch, both counted (`scrapestream_trace_spans_total`), so a slow or absent collector never holds a job.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from schemas.errors import ScrapestreamError
from streams.runtime import trace_context

log = logging.getLogger(__name__)
EXPORTERS = ("otlp", "zipkin", "console")
SHUTDOWN_FLUSH_S = 2.0  # at exit, what is queued gets this long, never a dead collector's timeout
_spans: Counter[str] = Counter()  # exported, dropped (queue full), failed (the export failed)
_lock = threading.Lock()
_provider: TracerProvider | None = None


class TracingError(ScrapestreamError):
    """A tracing setting this process cannot use."""


def configure() -> bool:
    """Set tracing up once for the process, as its environment says (the SDK's exporters, sampler
    and resource read the same `OTEL_*` variables); whether it is on."""
    global _provider
    environ = os.environ
    with _lock:
        if _provider is not None:
            return True
        exporters = _exporters(environ)
        if not exporters:
            return False
        resource = Resource.create({} if environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: "scrapestream"})
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        for exporter in exporters:
            provider.add_span_processor(BoundedExport(exporter, **_batching(environ)))
        _provider = provider
        follows_parent = isinstance(provider.sampler, ParentBased)
        trace_context.use_tracer(provider.get_tracer("scrapestream"), follows_parent)
        atexit.register(shutdown)
        return True


def flush(timeout_s: float = SHUTDOWN_FLUSH_S) -> bool:
    """Wait until what is queued has been exported (or failed); whether it was, within `timeout_s`."""
    provider = _provider
    return provider is None or provider.force_flush(int(timeout_s * 1000))


def shutdown() -> None:
    """Stop tracing: what is queued gets `SHUTDOWN_FLUSH_S` to leave."""
    global _provider
    with _lock:
        provider, _provider = _provider, None
    trace_context.use_tracer(None)
    if provider is not None:
        provider.force_flush(int(SHUTDOWN_FLUSH_S * 1000))
        provider.shutdown()


def _exporters(environ: Mapping[str, str]) -> list[SpanExporter]:
    return [_exporter(name) for name in _exporter_names(environ)]


def _exporter_names(environ: Mapping[str, str]) -> list[str]:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = [name.strip().lower() for name in environ.get("OTEL_TRACES_EXPORTER", "none").split(",")]
    names = [name for name in names if name and name != "none"]
    unknown = sorted(set(names) - set(EXPORTERS))
    if unknown:
        raise TracingError(
            f"OTEL_TRACES_EXPORTER names {', '.join(unknown)}: use otlp, zipkin, console or none"
        )
    return list(dict.fromkeys(names))


def _exporter(name: str) -> SpanExporter:
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if name == "zipkin":
        from opentelemetry.exporter.zipkin.json import ZipkinExporter

        return ZipkinExporter()
    return ConsoleSpanExporter(formatter=one_line)


def one_line(span: ReadableSpan) -> str:
    """A span as one line for a terminal: name, trace, duration, status and the job it is of."""
    context = span.get_span_context()
    trace = "-" if context is None else f"{context.trace_id:032x}"
    took = (
        ""
        if span.end_time is None or span.start_time is None
        else f" {(span.end_time - span.start_time) / 1e6:.1f} ms"
    )
    status = "" if span.status.is_ok else f" {span.status.status_code.name}"
    job = (span.attributes or {}).get("scrapestream.job.id")
    return f"span {span.name} trace={trace}{took}{status}{'' if job is None else f' job={job}'}\n"


def described(environ: Mapping[str, str]) -> str:
    """Where this environment's spans go, in a line for a person; what turns tracing on when off."""
    try:
        names = _exporter_names(environ)
    except TracingError as exc:
        return str(exc)
    if not names:
        return "off (OTEL_TRACES_EXPORTER=zipkin, otlp or console turns it on: docs/OPERATIONS.md, Tracing)"
    otlp = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318").rstrip("/") + "/v1/traces"
    said = {
        "otlp": f"otlp to {environ.get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') or otlp}",
        "zipkin": f"zipkin to {environ.get('OTEL_EXPORTER_ZIPKIN_ENDPOINT', 'http://localhost:9411/api/v2/spans')}",
        "console": "console, a line per span",
    }
    return "on: " + ", ".join(said[name] for name in names)


def _batching(environ: Mapping[str, str]) -> dict[str, float]:
    def number(name: str, default: float) -> float:
        raw = environ.get(name, "").strip()
        try:
            value = float(raw) if raw else default
        except ValueError as exc:
            raise TracingError(f"{name}={raw!r} is not a number") from exc
        if value <= 0:
            raise TracingError(f"{name}={raw!r} must be above zero")
        return value

    return {
        "max_queue": number("OTEL_BSP_MAX_QUEUE_SIZE", 2048),
        "max_batch": number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
        "delay_s": number("OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000,
    }


class BoundedExport(SpanProcessor):
    """Sampled spans, queued without waiting and exported in batches by a thread of its own."""

    def __init__(self, exporter: SpanExporter, max_queue: float, max_batch: float, delay_s: float) -> None:
        self._exporter = exporter
        self._queue: queue.Queue[ReadableSpan | None] = queue.Queue(int(max_queue))  # None: wake up
        self._max_batch = max(int(max_batch), 1)
        self._delay_s = delay_s
        self._stopping = threading.Event()
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scrapestream-span-export", daemon=True)
        self._thread.start()

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is None or not span.context.trace_flags.sampled:
            return
        try:
            self._queue.put_nowait(span)
        except queue.Full:
            _spans["dropped"] += 1

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._export(self._batch(self._delay_s))
        self._export(self._batch(0))

    def _batch(self, wait_s: float) -> list[ReadableSpan]:
        taken: list[ReadableSpan] = []
        give_up = time.monotonic() + wait_s
        while len(taken) < self._max_batch:
            try:
                left = give_up - time.monotonic()
                found = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if found is None:  # stopping: export what is here now
                break
            taken.append(found)
        if not taken:
            self._idle.set()
        return taken

    def _export(self, batch: Sequence[ReadableSpan]) -> None:
        if not batch:
            return
        self._idle.clear()
        try:
            result = self._exporter.export(batch)
        except Exception as exc:  # a collector's failure is its spans', never the job's
            log.warning("exporting %d spans failed: %s", len(batch), exc)
            result = SpanExportResult.FAILURE
        _spans["exported" if result is SpanExportResult.SUCCESS else "failed"] += len(batch)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        give_up = time.monotonic() + timeout_millis / 1000
        while time.monotonic() < give_up:
            if self._queue.empty() and self._idle.is_set():
                return True
            time.sleep(0.01)
        return False

    def shutdown(self) -> None:
        self._stopping.set()
        with contextlib.suppress(queue.Full):  # a full queue keeps the thread busy: it sees the stop
            self._queue.put_nowait(None)
        self._thread.join(SHUTDOWN_FLUSH_S)
        self._exporter.shutdown()


class SpanCounts(Collector):
    """The process's spans by what became of them, read when Prometheus scrapes."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "scrapestream_trace_spans",
            "Sampled spans this process finished, by what became of them: exported, dropped (the export"
            " queue was full) or failed (the collector refused or did not answer in time)",
            labels=["outcome"],
        )
        for outcome in ("exported", "dropped", "failed"):
            family.add_metric([outcome], _spans[outcome])
        yield family


SPAN_COUNTS = SpanCounts()
