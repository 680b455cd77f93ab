"""Submit → lease → fetch → completion → callback, on a real broker with loopback origins."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import timedelta
from typing import Any
from uuid import uuid4

import httpx
import msgspec
import pytest
import pytest_asyncio
from standardwebhooks import Webhook

from projections.lifecycle.audit import audit_of
from projections.lifecycle.dispatch import dispatch_of
from projections.lifecycle.identity import audit_stream_id
from schemas.codec import encode
from schemas.commands import CancelJob, SubmitJob
from schemas.enums import ActorRole, AuditAction, AuditOutcome, JobStatus
from schemas.events import AuditRecorded, JobCompleted, RetryScheduled
from schemas.records import Request
from streams.clock import utc_now
from streams.runtime.publisher import Publisher
from tests.e2e.conftest import callback_key, running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(broker, tmp_path_factory):
    settings = worker_settings(broker.bootstrap, tmp_path_factory.mktemp("worker"))
    async with running_system(settings) as running:
        yield running


async def test_a_200_page_succeeds_in_one_attempt_and_stores_the_page(system, origin):
    job_id = await system.submit(origin.url("/page/one"))
    completion = await system.completion(job_id)
    assert completion.status is JobStatus.SUCCEEDED
    assert completion.attempt_count == 1
    # A quick fetch reports once: no separate start, no renewal.
    await system.events.wait_for(lambda _: "JobSucceeded" in system.event_kinds(job_id))
    kinds = ["JobAccepted", "JobSucceeded"]  # accepted with its first lease, succeeded with its attempt
    assert system.event_kinds(job_id) == kinds
    (artifact,) = completion.artifacts
    stored = (system.settings.data_dir / "artifacts" / artifact.key).read_bytes()
    assert stored == b"page /page/one"
    assert artifact.sha256 == hashlib.sha256(stored).hexdigest()


async def test_503_then_200_succeeds_on_the_second_attempt_after_the_backoff(system, origin):
    job_id = await system.submit(origin.url("/flaky/a"))
    completion = await system.completion(job_id)
    assert completion.status is JobStatus.SUCCEEDED
    assert completion.attempt_count == 2
    await system.events.wait_for(lambda _: "JobSucceeded" in system.event_kinds(job_id))  # may trail
    retry = next(e for e in system.events.of_job(job_id) if isinstance(e, RetryScheduled))
    second = [d for e in system.events.of_job(job_id) if (d := dispatch_of(e)) is not None][1]
    assert retry.next_attempt_at >= retry.occurred_at + timedelta(milliseconds=300)
    assert second.occurred_at >= retry.next_attempt_at


async def test_429_with_retry_after_is_not_redispatched_before_two_seconds(system, origin):
    job_id = await system.submit(origin.url("/limited/a"))
    completion = await system.completion(job_id)
    assert completion.status is JobStatus.SUCCEEDED
    await system.events.wait_for(lambda _: "JobSucceeded" in system.event_kinds(job_id))  # may trail
    retry = next(e for e in system.events.of_job(job_id) if isinstance(e, RetryScheduled))
    second = [d for e in system.events.of_job(job_id) if (d := dispatch_of(e)) is not None][1]
    assert retry.failure.code == "HTTP_429"
    assert second.occurred_at >= retry.next_attempt_at
    # As the origin saw it: the second request came two seconds or more after its 429.
    answered, asked_again = origin.arrivals["/limited/a"]
    assert asked_again - answered >= 2


async def test_a_long_fetch_reports_its_start_then_renews_its_lease_on_the_derived_interval(system, origin):
    # Lease 8 s + 10 s grace = 18 s: the start is reported after 1 s, the renewal 6 s after the start.
    job_id = await system.submit(origin.url("/sleep/6500"))
    completion = await system.completion(job_id)
    assert completion.status is JobStatus.SUCCEEDED
    await system.events.wait_for(lambda _: "JobSucceeded" in system.event_kinds(job_id))
    kinds = system.event_kinds(job_id)
    assert kinds.count("LeaseRenewed") == 1
    assert kinds.index("AttemptStarted") < kinds.index("LeaseRenewed") < kinds.index("JobSucceeded")
    started, renewed = (
        e for e in system.events.of_job(job_id) if type(e).__name__ in ("AttemptStarted", "LeaseRenewed")
    )
    assert renewed.lease_id == started.lease_id
    # 5 s by the worker's monotonic clock; event times are wall-clock milliseconds, so not exactly.
    assert renewed.occurred_at - started.occurred_at > timedelta(seconds=4)
    assert renewed.lease_expires_at > started.lease_expires_at


async def test_404_dead_letters_after_one_attempt_with_the_status_as_code(system, origin):
    job_id = await system.submit(origin.url("/nothing-here"))
    completion = await system.completion(job_id)
    assert completion.status is JobStatus.DEAD_LETTER
    assert completion.attempt_count == 1
    assert completion.failure.code == "HTTP_404"


async def test_a_deadline_shorter_than_the_backoff_dead_letters_as_deadline_exceeded(system, origin):
    job_id = await system.submit(origin.url("/unavailable/a"), deadline_at=utc_now() + timedelta(seconds=10))
    completion = await system.completion(job_id)
    assert completion.status is JobStatus.DEAD_LETTER
    assert completion.failure.code == "JOB_DEADLINE_EXCEEDED"


async def test_the_same_submission_three_times_is_one_job_and_one_completion(system, origin):
    url = origin.url("/page/repeated")
    job_ids = {await system.submit(url, idempotency_key="same") for _ in range(3)}
    (job_id,) = job_ids
    await system.completion(job_id)
    await system.events.wait_for(lambda _: system.event_kinds(job_id).count("SubmissionReused") == 2)
    assert system.event_kinds(job_id).count("JobAccepted") == 1
    assert len(system.completions.of_job(job_id)) == 1
    assert origin.hits["/page/repeated"] == 1


async def test_owner_cancels_a_running_job_and_another_caller_is_refused_and_audited(system, origin):
    job_id = await system.submit(origin.url("/slow/cancel"))
    await system.events.wait_for(lambda _: "JobAccepted" in system.event_kinds(job_id))
    stranger = CancelJob(job_id=job_id, actor_id="svc-b", actor_role=ActorRole.SERVICE, reason="not mine")
    await system.client.cancel(stranger)
    owner = CancelJob(job_id=job_id, actor_id="svc-a", actor_role=ActorRole.SERVICE, reason="changed my mind")
    await system.client.cancel(owner)
    completion = await system.completion(job_id)
    assert completion.status is JobStatus.CANCELLED
    target = f"job:{job_id}"
    await system.events.wait_for(
        lambda records: sum(isinstance(r, AuditRecorded) and r.target == target for r in records) == 2
    )
    # The creation's audit record is its acceptance's (a service submitting as itself).
    audits = [a for e in system.events.records if (a := audit_of(e)) is not None and a.target == target]
    assert sorted((a.action, a.actor_id, a.outcome) for a in audits) == sorted(
        [
            (AuditAction.JOB_CREATE, "svc-a", AuditOutcome.ALLOWED),
            (AuditAction.JOB_CANCEL, "svc-b", AuditOutcome.DENIED),
            (AuditAction.JOB_CANCEL, "svc-a", AuditOutcome.ALLOWED),
        ]
    )
    # The stranger's refusal is kept in its own audit stream: the job holds only what happened to it.
    refused = next(a for a in audits if a.actor_id == "svc-b")
    assert refused.job_id == audit_stream_id("svc-b", refused.occurred_at)
    own = [audit_of(e) for e in system.events.of_job(job_id)]
    assert [a.actor_id for a in own if a is not None] == ["svc-a"] * 2
    origin.release.set()
    # The fetch was stopped by the lease's revocation, or, had it already finished, its report is stale.
    executor = system.worker.executor
    for _ in range(600):
        if executor.revocations or "StaleReportIgnored" in system.event_kinds(job_id):
            break
        await asyncio.sleep(0.1)
    assert executor.revocations or "StaleReportIgnored" in system.event_kinds(job_id)
    assert "JobSucceeded" not in system.event_kinds(job_id)
    assert len(system.completions.of_job(job_id)) == 1


async def test_owner_cancels_a_job_waiting_for_its_retry_before_it_is_dispatched_again(system, origin):
    job_id = await system.submit(origin.url("/unavailable/cancel"))
    await system.events.wait_for(lambda _: "RetryScheduled" in system.event_kinds(job_id))
    owner = CancelJob(
        job_id=job_id, actor_id="svc-a", actor_role=ActorRole.SERVICE, reason="no longer needed"
    )
    await system.client.cancel(owner)
    completion = await system.completion(job_id)
    assert completion.status is JobStatus.CANCELLED
    assert completion.attempt_count == 1
    assert system.event_kinds(job_id).count("JobDispatched") == 0  # only attempt 1, leased on acceptance
    assert origin.hits["/unavailable/cancel"] == 1


async def test_a_callback_is_delivered_after_two_failures_and_its_signature_verifies(system, origin):
    hook = f"/hook/2/{uuid4().hex}"
    job_id = await system.submit(origin.url("/page/called-back"), callback_url=origin.url(hook))
    completion = await system.completion(job_id)
    await system.events.wait_for(lambda _: "CallbackDelivered" in system.event_kinds(job_id))
    deliveries = origin.callbacks[hook]
    assert len(deliveries) == 3
    assert len({headers["webhook-id"] for headers, _ in deliveries}) == 1
    headers, body = deliveries[-1]
    payload = Webhook(callback_key("svc-a")).verify(body, headers)
    assert payload["job_id"] == str(job_id)
    assert payload["status"] == completion.status.value


async def test_a_callback_receiver_that_is_always_down_is_abandoned(system, origin):
    from streams.broker.embedded import free_loopback_port

    down = f"http://127.0.0.1:{free_loopback_port()}/hook"
    job_id = await system.submit(origin.url("/page/unheard"), callback_url=down)
    await system.completion(job_id)
    events = await system.events.wait_for(lambda _: "CallbackAbandoned" in system.event_kinds(job_id))
    abandoned = next(e for e in events if type(e).__name__ == "CallbackAbandoned" and e.job_id == job_id)
    assert abandoned.delivery_attempts >= 2
    assert abandoned.last_error.startswith("CONNECTION_FAILED")


async def test_garbage_and_invalid_input_go_to_dead_input_and_the_next_job_completes(system, origin):
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=system.settings.kafka_bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        await producer.send_and_wait(system.settings.topic("submit"), b"\x00garbage", key=b"g")
        submission = encode(
            SubmitJob(caller_identity="x", request=Request(url="https://e.com/"), deadline_at=utc_now())
        )
        invalid = submission[:10] + b"\xff" * 40  # SubmitJob's fingerprint, a body that is not a SubmitJob
        await producer.send_and_wait(system.settings.topic("submit"), invalid, key=b"i")
        completed = encode(msgspec.convert(_a_completion(), JobCompleted))
        await producer.send_and_wait(system.settings.topic("submit"), completed, key=b"c")
    finally:
        await producer.stop()
    dead = await system.dead_input.wait_for(lambda records: len(records) >= 3)
    reasons = {record.value: record.reason for record in dead}
    assert "this deployment has no schema registry" in reasons[b"\x00garbage"]
    assert "malformed SubmitJob body" in reasons[invalid]
    assert "JobCompleted is not a SubmitJob or CancelJob" in reasons[completed]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        counters = (await http.get("/healthz")).json()["counters"]
    assert counters[f"dead_input.{system.settings.topic('submit')}"] >= 3
    job_id = await system.submit(origin.url("/page/after-garbage"))
    assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED


def _a_completion() -> dict[str, object]:
    return {
        "job_id": str(uuid4()),
        "caller_identity": "x",
        "idempotency_key": "k",
        "job_type": "http.fetch",
        "url": "https://e.com/",
        "status": "SUCCEEDED",
        "attempt_count": 1,
        "completed_at": utc_now(),
    }


async def test_a_body_beyond_what_a_submission_record_can_carry_is_refused_as_invalid(system, origin):
    beyond = [
        {"deadline_s": 1e300},
        {"deadline_s": 4e9},
        {"attempt_limit": 2**31},
        {"render": {"viewport_width": 2**70}},
    ]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        answers = [
            await http.post("/jobs", json={"caller_identity": "svc-a", "url": origin.url("/page/b"), **extra})
            for extra in beyond
        ]
        redrive = await http.post(
            f"/jobs/{uuid4()}/redrive", json={"reason": "x", "deadline_at": "9999-12-31T23:59:59-05:00"}
        )
    assert [answer.status_code for answer in answers] == [400] * len(beyond)
    assert {answer.json()["code"] for answer in answers} == {"invalid_request"}
    assert redrive.status_code == 400
    job_id = await system.submit(origin.url("/page/after-bodies-beyond"))
    assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED


async def test_the_http_api_serves_the_job_projection(system, origin):
    job_id = await system.submit(origin.url("/page/api"))
    completion = await system.completion(job_id)
    # The completion is published just before the events that cause it are folded.
    await system.events.wait_for(lambda _: "JobSucceeded" in system.event_kinds(job_id))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        for _ in range(100):
            job = (await http.get(f"/jobs/{job_id}")).json()
            if job["state"] == "SUCCEEDED":
                break
            await asyncio.sleep(0.02)
        missing = await http.get(f"/jobs/{uuid4()}")
        malformed = await http.get("/jobs/not-a-uuid")
        health = (await http.get("/healthz")).json()
    assert job["state"] == "SUCCEEDED"
    assert job["artifacts"][0]["sha256"] == completion.artifacts[0].sha256
    assert len(job["attempts"]) == 1
    assert missing.status_code == 404
    assert malformed.status_code == 400
    assert health["status"] == "ok"
    assert health["owned_partitions"] == [0, 1]


async def test_the_docs_page_needs_nothing_from_outside_the_package(system):
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        page = (await http.get("/docs")).text
        assert "cdn" not in page
        for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
            assert f"/docs-assets/{asset}" in page
            served = await http.get(f"/docs-assets/{asset}")
            assert served.status_code == 200
            assert len(served.content) > 10_000


async def test_metrics_have_the_process_python_and_http_request_families(system, origin):
    job_id = await system.submit(origin.url("/page/metered"))
    await system.completion(job_id)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        await http.get(f"/jobs/{job_id}")
        await http.get("/jobs", params={"limit": 1})
        text = (await http.get("/metrics")).text
    for family in ("process_cpu_seconds_total", "process_resident_memory_bytes", "python_info", "python_gc"):
        assert family in text
    assert (
        'scrapestream_http_request_duration_seconds_count{method="GET",route="/jobs/{job_id}",status="200"}'
        in text
    )
    assert 'route="/jobs",status="200"' in text


async def test_a_partition_no_worker_holds_fails_readiness_until_the_group_rebalances(system):
    worker = system.worker
    routing = worker.consumer._routing  # the table the group's leader handed out
    due = system.settings.topic("due")
    # What the leader hands out when its metadata lacked a topic created just before the join.
    routing.assigned = {topic: numbers for topic, numbers in routing.assigned.items() if topic != due}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
        answer = await http.get("/readyz")
        assert answer.status_code == 503
        assert any(f"of {due} are held by no worker" in reason for reason in answer.json()["reasons"])
        for _ in range(600):  # the consumer notices within two checks and the group rebalances
            if (await http.get("/readyz")).status_code == 200:
                break
            await asyncio.sleep(0.1)
        assert (await http.get("/readyz")).status_code == 200
    assert due in routing.assigned


async def test_a_reader_who_saw_the_completion_finds_the_job_finished_and_its_artifact(
    system, origin, monkeypatch
):
    """Completions are published before the events that record them (docs/LIFECYCLE.md): with the
    events' append held back, a read right after the completion still answers the finished job."""
    events_topic = system.settings.topic("events")
    send_all = Publisher.send_all

    async def slow_events(publisher: Publisher, messages: Any, *batch: Any) -> Any:
        if any(message.topic == events_topic for message in messages):
            await asyncio.sleep(0.5)
        return await send_all(publisher, messages, *batch)

    monkeypatch.setattr(Publisher, "send_all", slow_events)
    job_id = await system.submit(origin.url("/page/read-after-completion"))
    (artifact,) = (await system.completion(job_id)).artifacts
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        job, stored = await asyncio.gather(
            http.get(f"/jobs/{job_id}"), http.get(f"/artifacts/{artifact.artifact_id}")
        )
    assert job.json()["state"] == "SUCCEEDED"
    assert (stored.status_code, stored.content) == (200, b"page /page/read-after-completion")
