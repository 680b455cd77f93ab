"""Hostile submissions and rejected ones, end to end: nothing wedges, everything ends exactly once."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from uuid import uuid4

import httpx
import pytest
import pytest_asyncio
from aiokafka import AIOKafkaProducer
from standardwebhooks import Webhook

from projections.lifecycle.identity import job_id_for
from schemas.codec import encode
from schemas.commands import CancelJob, SubmitJob
from schemas.enums import ActorRole, JobStatus
from schemas.events import JobCompleted
from schemas.records import Request
from streams.clock import utc_now
from tests.e2e.conftest import callback_key, running_system, worker_settings
from tests.poison import poison_records, refused_submissions

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(broker, tmp_path_factory):
    settings = worker_settings(
        broker.bootstrap,
        tmp_path_factory.mktemp("hostile"),
        profiles={"http.fetch": (8_000, 3), "pdf.render": (60_000, 2)},
    )
    async with running_system(settings) as running:
        yield running


async def publish_raw(system, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=system.settings.kafka_bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        for index, value in enumerate(values):
            await producer.send(system.settings.topic("submit"), value, key=f"k{index}".encode())
        await producer.flush()
    finally:
        await producer.stop()


async def test_poison_of_every_kind_goes_to_dead_input_once_and_the_jobs_between_complete(system, origin):
    poison = poison_records()
    valid = [await system.submit(origin.url(f"/page/between-{index}")) for index in range(3)]
    await publish_raw(system, list(poison.values()))
    after = [await system.submit(origin.url(f"/page/after-{index}")) for index in range(3)]
    for job_id in valid + after:
        assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED
    dead = await system.dead_input.wait_for(lambda records: len(records) >= len(poison))
    by_value = Counter(record.value for record in dead)
    for name, value in poison.items():
        assert by_value[value] == 1, name
    reasons = {record.value: record.reason for record in dead}
    assert "OverflowError" in reasons[poison["timestamp_past_9999"]]
    assert "Request is not a SubmitJob or CancelJob" in reasons[poison["wrong_record_type"]]


async def test_a_submission_that_is_valid_avro_but_unacceptable_ends_in_one_rejected_completion(system):
    refused = refused_submissions()
    await publish_raw(system, list(refused.values()))
    completions = await system.completions.wait_for(
        lambda records: {r.failure.code for r in records if r.status is JobStatus.REJECTED} >= set(refused)
    )
    rejected = [c for c in completions if c.status is JobStatus.REJECTED and c.caller_identity == "poison"]
    assert Counter(c.failure.code for c in rejected) == Counter(set(refused))


async def test_a_rejection_is_published_as_a_completion_and_posted_to_its_callback(system, origin):
    hook = f"/hook/0/{uuid4().hex}"
    job_id = await system.submit(
        "ftp://example.com/file", callback_url=origin.url(hook), labels={"team": "a"}
    )
    completion = await system.client.wait_for(job_id)
    assert completion.status is JobStatus.REJECTED
    assert completion.failure.code == "UNSUPPORTED_SCHEME"
    await system.events.wait_for(lambda _: "CallbackDelivered" in system.event_kinds(job_id))
    ((headers, body),) = origin.callbacks[hook]
    payload = Webhook(callback_key("svc-a")).verify(body, headers)
    assert payload["status"] == "REJECTED"
    assert payload["labels"] == {"team": "a"}
    assert [c.status for c in system.completions.of_job(job_id)] == [JobStatus.REJECTED]


async def test_waiting_returns_the_outcome_of_this_submission_not_an_earlier_rejection(system, origin):
    from datetime import timedelta

    from streams.clock import utc_now

    key = f"k-{uuid4().hex}"
    first = await system.submit(origin.url("/page/resubmitted"), idempotency_key=key, deadline_at=utc_now())
    assert (await system.client.wait_for(first)).status is JobStatus.REJECTED
    again = await system.submit(
        origin.url("/page/resubmitted"), idempotency_key=key, deadline_at=utc_now() + timedelta(minutes=5)
    )
    assert again == first
    completion = await system.client.wait_for(again)
    assert completion.status is JobStatus.SUCCEEDED
    await system.completions.wait_for(lambda _: len(system.completions.of_job(first)) >= 2)
    statuses = [c.status for c in system.completions.of_job(first)]
    assert statuses == [JobStatus.REJECTED, JobStatus.SUCCEEDED]


async def test_a_type_with_a_profile_but_no_runner_is_accepted_and_waits_until_cancelled(system, origin):
    job_id = await system.submit(origin.url("/page/pdf"), job_type="pdf.render")
    await system.events.wait_for(lambda _: "JobAccepted" in system.event_kinds(job_id))
    await system.client.cancel(
        CancelJob(job_id=job_id, actor_id="ops", actor_role=ActorRole.OPERATOR, reason="no pdf renderer")
    )
    completion = await system.client.wait_for(job_id)
    assert completion.status is JobStatus.CANCELLED
    assert system.attempts(job_id) == []  # waiting work is never run elsewhere
    assert origin.hits["/page/pdf"] == 0


async def test_a_submission_too_large_for_its_records_is_refused_and_the_next_job_runs(system, origin):
    labels = {f"label-{index}": "v" * 1_000 for index in range(30)}
    big = await system.submit(origin.url("/page/" + "x" * 7_000), labels=labels | {"huge": "v" * 600_000})
    assert (await system.client.wait_for(big)).failure.code == "INPUT_TOO_LARGE"
    small = await system.submit(origin.url("/page/after-big"))
    assert (await system.completion(small)).status is JobStatus.SUCCEEDED


async def test_every_submission_ends_in_exactly_one_completion_per_outcome(system):
    per_job = Counter((c.job_id, c.status) for c in system.completions.records if isinstance(c, JobCompleted))
    assert per_job
    assert set(per_job.values()) == {1}


async def test_a_submission_under_the_monitor_checks_key_prefix_is_refused_by_kafka_and_http(system, origin):
    key = f"scrapestream.monitor:{uuid4()}:1700000000000"  # shaped as a monitor's check would be
    url = origin.url("/page/reserved-key")
    forged = SubmitJob(
        caller_identity="svc-a",
        request=Request(url=url),
        idempotency_key=key,
        deadline_at=utc_now() + timedelta(minutes=5),
    )
    await publish_raw(system, [encode(forged)])
    dead = await system.dead_input.wait_for(
        lambda records: any("reserved for monitor checks" in r.reason for r in records)
    )
    assert sum("reserved for monitor checks" in r.reason for r in dead) == 1
    assert system.worker is not None
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        answer = await http.post(
            "/jobs", json={"caller_identity": "svc-a", "url": url, "idempotency_key": key}
        )
    assert answer.status_code == 400, answer.text
    assert "reserved for monitor checks" in answer.json()["message"]
    after = await system.submit(origin.url("/page/after-reserved-key"))
    assert (await system.completion(after)).status is JobStatus.SUCCEEDED
    assert system.events.of_job(job_id_for("svc-a", key)) == []  # no job under the forged key
