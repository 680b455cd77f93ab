"""One trace per job, from another team's producer to the callback, read back from a real Zipkin;
and a trace backend that is gone changes nothing for the jobs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import httpx
import pytest
from aiokafka import AIOKafkaProducer
from opentelemetry.exporter.zipkin.json import ZipkinExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, format_span_id, format_trace_id
from prometheus_client.parser import text_string_to_metric_families

from schemas.codec import encode
from schemas.commands import SubmitJob
from schemas.enums import JobStatus
from schemas.events import CallbackDelivered, JobSucceeded
from schemas.records import Request
from streams.broker.compat import start_whole
from streams.broker.embedded import free_loopback_port
from streams.clock import utc_now
from streams.runtime import tracing
from streams.runtime.trace_context import from_headers
from streams.worker import Worker
from tests.commands import run
from tests.e2e.conftest import Origin, running_system, settled_ownership, worker_settings

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.kafka_only]
SECRET_QUERY = "token=hunter2"


@pytest.fixture
def exported_to(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Sets tracing up in this process, exporting where the test says; off again afterwards."""

    def to(endpoint: str) -> None:
        monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
        monkeypatch.setenv("OTEL_EXPORTER_ZIPKIN_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_ZIPKIN_TIMEOUT", "2")
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "scrapestream")
        assert tracing.configure()

    try:
        yield to
    finally:
        tracing.shutdown()


def producer_tracer(zipkin: str) -> tuple[TracerProvider, Any]:
    """Another team's service with its own tracing, exporting to the same backend."""
    provider = TracerProvider(resource=Resource({SERVICE_NAME: "team-producer"}))
    provider.add_span_processor(SimpleSpanProcessor(ZipkinExporter(endpoint=f"{zipkin}/api/v2/spans")))
    return provider, provider.get_tracer("team-producer")


async def publish(bootstrap: str, topic: str, command: SubmitJob, traceparent: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await start_whole(producer.start, producer.stop)
    try:
        headers = [("traceparent", traceparent.encode()), ("tracestate", b"team=blue")]
        await producer.send_and_wait(topic, encode(command), headers=headers)
    finally:
        await producer.stop()


HTTP_TRACE_ID, HTTP_PARENT_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


async def trace_of(zipkin: str, trace_id: str, enough: Any) -> list[dict[str, Any]]:
    """The trace's spans once `enough(spans)` holds (spans arrive in batches)."""
    spans: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=zipkin) as http:
        for _ in range(150):
            answer = await http.get(f"/api/v2/trace/{trace_id}")
            spans = answer.json() if answer.status_code == 200 else []
            if enough(spans):
                return spans
            await asyncio.sleep(0.2)
    raise AssertionError(f"the trace never held what was expected: {sorted(s['name'] for s in spans)}")


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The spans of `name` in the order they started (Zipkin keeps names in lower case)."""
    return sorted((span for span in spans if span["name"] == name), key=lambda span: span["timestamp"])


def ends(span: dict[str, Any]) -> int:
    return int(span["timestamp"]) + int(span.get("duration", 0))


async def test_one_trace_holds_every_hop_of_a_retried_job_from_the_producer_to_its_callback(
    broker, origin: Origin, zipkin: str, exported_to: Any, tmp_path
):
    exported_to(f"{zipkin}/api/v2/spans")
    settings = worker_settings(broker.bootstrap, tmp_path / "a", partitions=4)
    provider, tracer = producer_tracer(zipkin)
    async with running_system(settings) as system:
        second = Worker(settings.model_copy(update={"data_dir": tmp_path / "b"}))
        await second.start()
        try:
            owned = await settled_ownership(system.worker, second)
            assert owned[0]  # the job's hops land on whichever worker holds each partition
            assert owned[1]
            command = SubmitJob(
                caller_identity="svc-a",
                idempotency_key="traced-1",
                request=Request(url=origin.url(f"/flaky/traced?{SECRET_QUERY}")),
                deadline_at=utc_now() + timedelta(minutes=5),
                callback_url=origin.url("/hook/0/traced"),
            )
            with tracer.start_as_current_span("publish scrape job", kind=SpanKind.PRODUCER) as produced:
                context = produced.get_span_context()
                trace_id = format_trace_id(context.trace_id)
                producer_span = format_span_id(context.span_id)
                await publish(
                    broker.bootstrap, settings.topic("submit"), command, f"00-{trace_id}-{producer_span}-01"
                )
            completed = await system.completions.wait_for(lambda found: bool(found), 60)
            job_id: UUID = completed[0].job_id
            assert completed[0].status is JobStatus.SUCCEEDED
            await system.events.wait_for(
                lambda events: any(isinstance(e, CallbackDelivered) and e.job_id == job_id for e in events)
            )
            assert system.worker is not None
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
                body = {"caller_identity": "svc-a", "url": origin.url("/page/traced-over-http")}
                traceparent = f"00-{HTTP_TRACE_ID}-{HTTP_PARENT_SPAN}-01"
                answer = await http.post("/jobs", json=body, headers={"traceparent": traceparent})
                assert answer.status_code == 201, answer.text
            await system.completion(UUID(answer.json()["job_id"]))
        finally:
            await second.stop()

        # The completion record and the callback carry the trace: a consumer's own span joins it.
        completion_record = next(r for r in system.completions.raw if r.key == str(job_id).encode())
        carried = from_headers(tuple(completion_record.headers))
        assert carried is not None
        assert carried.trace_id == trace_id
        assert carried.state == "team=blue"
        (hook_headers, _), *_ = origin.callbacks["/hook/0/traced"]
        assert hook_headers["traceparent"].split("-")[1] == trace_id
        consumer = from_headers(tuple(completion_record.headers))
        assert consumer is not None
        with tracer.start_as_current_span(
            "consume completion",
            context=_remote_context(consumer.trace_id, consumer.span_id),
            kind=SpanKind.CONSUMER,
        ):
            pass
        provider.shutdown()
        tracing.flush(10)

        def complete(spans: list[dict[str, Any]]) -> bool:
            names = [span["name"] for span in spans]
            return (
                names.count("scrapestream attempt") == 2
                and "scrapestream callback" in names
                and "consume completion" in names
                and "scrapestream decide reportcallback" in names
            )

        spans = await trace_of(zipkin, trace_id, complete)

    # A job submitted over HTTP starts the same way, under the caller's span.
    http_spans = await trace_of(
        zipkin, HTTP_TRACE_ID, lambda found: bool(named(found, "scrapestream intake"))
    )
    (http_intake,) = named(http_spans, "scrapestream intake")
    assert http_intake["parentId"] == HTTP_PARENT_SPAN
    assert http_intake["tags"]["http.route"] == "/jobs"

    by_id = {span["id"]: span for span in spans}
    (producer,) = named(spans, "publish scrape job")
    assert producer["localEndpoint"]["serviceName"] == "team-producer"
    # One tree: every span but the producer's has its parent in the trace.
    assert all(span.get("parentId") in by_id for span in spans if span is not producer)
    (intake,) = named(spans, "scrapestream intake")
    assert intake["parentId"] == producer["id"]
    (accepted,) = named(spans, "scrapestream decide submitjob")
    assert accepted["tags"]["scrapestream.job.id"] == str(job_id)
    assert accepted["tags"]["scrapestream.rule"] == "JobAccepted"
    assert accepted["tags"]["scrapestream.job.state"] == "LEASED"
    first, second_try = named(spans, "scrapestream attempt")
    assert first["tags"]["http.response.status_code"] == "503"
    assert first["tags"]["error.type"] == "HTTP_503"
    assert second_try["tags"]["http.response.status_code"] == "200"
    assert second_try["tags"]["scrapestream.cache"] == "miss"
    assert first["tags"]["http.request.method"] == "GET"
    assert first["tags"]["url.full"] == origin.url("/flaky/traced")
    (backoff,) = named(spans, "scrapestream wait retry_backoff")
    (retried,) = [
        s
        for s in named(spans, "scrapestream decide reportattempt")
        if "RetryScheduled" in s["tags"]["scrapestream.events"]
    ]
    assert retried["tags"]["scrapestream.rule"].startswith("RetryScheduled")
    (completion,) = named(spans, "scrapestream completion")
    (callback,) = named(spans, "scrapestream callback")
    assert callback["tags"]["http.response.status_code"] == "204"
    (consumed,) = named(spans, "consume completion")
    assert consumed["parentId"] == completion["id"]
    # Causal order: each hop starts after the one that caused it (event times are in milliseconds).
    order = [producer, intake, accepted, first, retried, second_try, completion, callback, consumed]
    starts = [int(span["timestamp"]) for span in order]
    assert starts == sorted(starts)
    assert int(first["timestamp"]) <= int(backoff["timestamp"]) <= ends(first) + 1_000  # from its end
    assert ends(backoff) <= int(second_try["timestamp"]) + 1_000  # until the next attempt
    # Never the URL's query, nor a credential.
    assert not any(SECRET_QUERY in str(value) for span in spans for value in span.get("tags", {}).values())


def _remote_context(trace_id: str, span_id: str) -> Any:
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    parent = SpanContext(int(trace_id, 16), int(span_id, 16), True, TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(parent))


async def test_a_trace_backend_that_is_gone_leaves_jobs_as_they_were(
    broker, origin: Origin, exported_to: Any, tmp_path
):
    exported_to(f"http://127.0.0.1:{free_loopback_port()}/api/v2/spans")  # nothing listens there
    settings = worker_settings(broker.bootstrap, tmp_path, partitions=4)
    async with running_system(settings) as system:
        assert system.worker is not None
        before = await span_counts(system.worker.web_port)
        job_ids = [await system.submit(origin.url(f"/page/untraced-{n}")) for n in range(10)]
        for job_id in job_ids:
            assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED
        await system.events.wait_for(
            lambda events: sum(isinstance(e, JobSucceeded) for e in events) >= len(job_ids)
        )
        tracing.flush(10)
        after = await span_counts(system.worker.web_port)
        completions = [r for r in system.completions.raw if UUID(r.key.decode()) in set(job_ids)]
    # None came in: each job started a trace of its own, and its completion carries it.
    started = {from_headers(tuple(record.headers)) for record in completions}
    assert None not in started
    assert len({context.trace_id for context in started if context is not None}) == len(job_ids)
    assert after["failed"] > before["failed"]  # what could not be exported is counted; no job waited on it
    assert after["exported"] == before["exported"]


async def span_counts(port: int | None) -> dict[str, float]:
    """The worker's `scrapestream_trace_spans`, by outcome."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    return {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "scrapestream_trace_spans"
        for sample in family.samples
    }


async def test_a_job_submitted_over_http_keeps_its_callers_trace_with_tracing_off_and_links_it(
    broker, origin: Origin, tmp_path
):
    viewer = "https://traces.example/trace/{trace_id}"
    settings = worker_settings(broker.bootstrap, tmp_path, trace_url_template=viewer)
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    traceparent = f"00-{trace_id}-00f067aa0ba902b7-01"
    async with running_system(settings) as system:
        assert system.worker is not None
        await settled_ownership(system.worker, partitions=settings.partitions)
        base_url = f"http://127.0.0.1:{system.worker.web_port}"
        async with httpx.AsyncClient(base_url=base_url) as http:
            body = {"caller_identity": "svc-a", "url": origin.url("/page/over-http")}
            answer = await http.post("/jobs", json=body, headers={"traceparent": traceparent})
            assert answer.status_code == 201, answer.text
            job_id = UUID(answer.json()["job_id"])
            await system.completion(job_id)
            view = (await http.get(f"/jobs/{job_id}")).json()
            page = (await http.get(f"/ui/jobs/{job_id}")).text
            malformed = {"traceparent": f"00-{trace_id}-0000000000000000-01"}  # no span id: ignored
            other = await http.post("/jobs", json=body | {"idempotency_key": "other"}, headers=malformed)
            untraced_view = (await http.get(f"/jobs/{other.json()['job_id']}")).json()
        code, output = await run("get", str(job_id), "--url", base_url, cwd=tmp_path)
    assert view["trace_id"] == trace_id
    assert view["trace_url"] == f"https://traces.example/trace/{trace_id}"
    assert trace_id in page
    assert f"https://traces.example/trace/{trace_id}" in page
    assert code == 0, output
    assert trace_id in output
    assert "traces.example" in output
    # Every record of the job carries the caller's trace, tracing off or not.
    completion = next(r for r in system.completions.raw if r.key == str(job_id).encode())
    carried = from_headers(tuple(completion.headers))
    assert carried is not None
    assert carried.trace_id == trace_id
    assert untraced_view["trace_id"] is None  # tracing off: no trace is made up
