"""The read API and trust, as users see them: two workers with auth on, real tokens and signed commands."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import httpx
import pytest
import pytest_asyncio
from aiokafka import AIOKafkaProducer
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate as validate_spec
from prometheus_client.parser import text_string_to_metric_families

from projections.lifecycle.identity import job_target
from schemas.codec import encode
from schemas.commands import CancelJob, SubmitJob
from schemas.enums import ActorRole
from schemas.records import Request
from streams.auth.signing import Binding, private_key_from_text, sign
from streams.clock import utc_now
from streams.runtime.publisher import partition_of
from tests.e2e.cluster import Cluster, answered, auth_on, running_cluster
from tests.e2e.conftest import Origin
from tests.principals import ISSUED

pytestmark = pytest.mark.asyncio(loop_scope="module")
JOBS = 12


@dataclass
class ReadCluster(Cluster):
    jobs: dict[UUID, str] = field(default_factory=dict)  # job id -> caller


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def cluster(broker, origin: Origin, tmp_path_factory) -> AsyncIterator[ReadCluster]:
    root = tmp_path_factory.mktemp("read-api")
    settings = auth_on(broker.bootstrap, root / "a", partitions=4)
    async with running_cluster(settings, root / "b") as running:
        cluster = ReadCluster(**vars(running))
        for n in range(JOBS):
            caller = "svc-a" if n % 2 else "svc-b"
            cluster.jobs[await cluster.submit(caller, origin.url(f"/page/read-{n}"))] = caller
        for job_id in cluster.jobs:
            await cluster.system.completion(job_id)
        yield cluster


async def test_either_worker_answers_for_every_job_of_both(cluster: ReadCluster):
    for worker in cluster.workers:
        assert worker.lifecycle is not None
        assert any(_partition(job) in worker.lifecycle.owned for job in cluster.jobs)
    async with cluster.api(0) as first, cluster.api(1) as second:
        for job_id in cluster.jobs:
            one = await answered(first, "GET", f"/jobs/{job_id}")
            other = await answered(second, "GET", f"/jobs/{job_id}")
            assert one.status_code == other.status_code == 200
            assert one.json() == other.json()
            assert one.json()["state"] == "SUCCEEDED"
            assert one.json()["attempts"][0]["http_status"] == 200
            events = (await answered(second, "GET", f"/jobs/{job_id}/events")).json()["items"]
            assert [event["sequence"] for event in events] == list(range(1, len(events) + 1))
            assert events[0]["type"] == "JobAccepted"


async def test_paging_either_worker_visits_every_job_once_newest_first(cluster: ReadCluster):
    for worker in (0, 1):
        async with cluster.api(worker) as http:
            seen, accepted, cursor = [], [], None
            while True:
                params = {"limit": 5} | ({"cursor": cursor} if cursor else {})
                page = await answered(http, "GET", "/jobs", params=params)
                assert page.status_code == 200, page.text
                body = page.json()
                seen += [UUID(job["job_id"]) for job in body["items"]]
                # as times, not text: "…:43Z" sorts after "…:43.022Z"
                accepted += [datetime.fromisoformat(job["accepted_at"]) for job in body["items"]]
                cursor = body["next_cursor"]
                if cursor is None:
                    break
            assert len(seen) == len(set(seen))
            assert set(seen) >= set(cluster.jobs)
            assert accepted == sorted(accepted, reverse=True)


async def test_a_service_reads_and_cancels_only_its_own_jobs_and_refusals_are_audited(cluster: ReadCluster):
    theirs = next(job for job, caller in cluster.jobs.items() if caller == "svc-b")
    mine = next(job for job, caller in cluster.jobs.items() if caller == "svc-a")
    async with cluster.api(0, "svc-a") as service, cluster.api(1, "viewer") as viewer:
        refused = await answered(service, "GET", f"/jobs/{theirs}")
        missing = await answered(service, "GET", f"/jobs/{uuid4()}")
        assert refused.status_code == missing.status_code == 404  # another caller's job: as none at all
        assert refused.json()["code"] == missing.json()["code"] == "not_found"
        assert (await answered(service, "GET", f"/jobs/{mine}")).status_code == 200
        cancel = await answered(service, "POST", f"/jobs/{theirs}/cancel", json={"reason": "not mine"})
        assert cancel.status_code == 404
        listed = (await answered(service, "GET", "/jobs", params={"limit": 100})).json()["items"]
        assert {job["caller_identity"] for job in listed} == {"svc-a"}
        other = await answered(service, "GET", "/jobs", params={"caller": "svc-b"})
        assert other.status_code == 403
        assert (await answered(service, "GET", "/audit")).status_code == 403
        audit: list[dict[str, Any]] = []
        for _ in range(100):
            answer = await answered(viewer, "GET", "/audit", params={"target": job_target(theirs)})
            audit = answer.json()["items"]
            if {"JOB_READ", "JOB_CANCEL"} <= {
                record["action"] for record in audit if record["actor_id"] == "svc-a"
            }:
                break
            await asyncio.sleep(0.1)
        denied = {(r["action"], r["outcome"], r["actor_role"]) for r in audit if r["actor_id"] == "svc-a"}
        assert ("JOB_READ", "DENIED", "SERVICE") in denied
        assert ("JOB_CANCEL", "DENIED", "SERVICE") in denied
    async with cluster.api(0) as admin:
        assert (await answered(admin, "GET", f"/jobs/{theirs}")).json()["state"] == "SUCCEEDED"


async def test_a_viewer_cannot_cancel_and_tokens_are_checked(cluster: ReadCluster, origin: Origin):
    running = await cluster.submit("svc-a", origin.url("/slow/viewer"))
    await cluster.system.events.wait_for(lambda _: "JobAccepted" in cluster.system.event_kinds(running))
    async with cluster.api(1, "viewer") as viewer:
        refused = await answered(viewer, "POST", f"/jobs/{running}/cancel", json={"reason": "try"})
        assert refused.status_code == 403
        assert "VIEWER" in refused.json()["message"]
    async with cluster.api(0, None, token="not-a-token") as wrong, cluster.api(0, None) as anonymous:
        bad = await wrong.get(f"/jobs/{running}")
        missing = await anonymous.get(f"/jobs/{running}")
    assert bad.status_code == missing.status_code == 401
    assert bad.json()["code"] == "invalid_token"
    assert missing.json()["code"] == "unauthenticated"
    assert "Bearer" in missing.headers["www-authenticate"]
    async with cluster.api(0, "operator") as operator:
        cancelled = await answered(operator, "POST", f"/jobs/{running}/cancel", json={"reason": "ops"})
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["audit"]["actor_id"] == "operator"
    assert (await cluster.system.completion(running)).status.value == "CANCELLED"


async def test_unsigned_or_forged_commands_are_refused_to_dead_input(cluster: ReadCluster, origin: Origin):
    target = await cluster.submit("svc-a", origin.url("/slow/forged"))
    await cluster.system.events.wait_for(lambda _: bool(cluster.system.events.of_job(target)))
    forged = encode(
        CancelJob(
            job_id=target, actor_id="admin", actor_role=ActorRole.ADMIN, reason="forged", command_id=None
        )
    )
    wrong_key = private_key_from_text(ISSUED["svc-b"].signing_key)
    producer = AIOKafkaProducer(bootstrap_servers=cluster.settings.kafka_bootstrap)
    await producer.start()
    try:
        topic, key = cluster.settings.topic("submit"), str(target).encode()
        here = Binding(cluster.settings.deployment_id, topic)
        await producer.send_and_wait(topic, forged, key=key)
        await producer.send_and_wait(topic, forged, key=key, headers=sign("admin", wrong_key, forged, here))
        unknown = sign("nobody", wrong_key, forged, here)
        await producer.send_and_wait(topic, forged, key=key, headers=unknown)
    finally:
        await producer.stop()
    dead = await cluster.system.dead_input.wait_for(
        lambda records: sum("refused" in record.reason for record in records) >= 3
    )
    reasons = [record.reason for record in dead if "refused" in record.reason]
    assert any("unsigned" in reason for reason in reasons)
    assert any("bad signature" in reason for reason in reasons)
    assert any("unknown signer" in reason for reason in reasons)
    async with cluster.api(0, "svc-a") as owner:
        assert (await answered(owner, "GET", f"/jobs/{target}")).json()["state"] != "CANCELLED"


async def test_a_service_submitting_for_another_caller_is_rejected(cluster: ReadCluster, origin: Origin):
    command = SubmitJob(
        caller_identity="svc-b",
        request=Request(url=origin.url("/page/impostor")),
        deadline_at=utc_now() + timedelta(minutes=5),
    )
    job_id = await cluster.clients["svc-a"].submit(command)
    completion = await cluster.clients["svc-a"].wait_for(job_id)
    assert completion.status.value == "REJECTED"
    assert completion.failure is not None
    assert completion.failure.code == "NOT_PERMITTED"


async def test_only_operators_and_admins_switch_a_job_type_and_a_refusal_is_audited(cluster: ReadCluster):
    for name in ("viewer", "svc-a"):
        async with cluster.api(0, name) as api:
            refused = await answered(api, "POST", "/job-types/http.fetch/disable", json={"reason": "mine"})
            assert refused.status_code == 403, refused.text
    async with cluster.api(1, "viewer") as viewer:
        listed = {i["name"]: i for i in (await answered(viewer, "GET", "/job-types")).json()["items"]}
        assert listed["http.fetch"]["enabled"] is True
        for _ in range(100):
            audit = (await answered(viewer, "GET", "/audit", params={"target": "job-type:http.fetch"})).json()
            if {r["actor_id"] for r in audit["items"]} >= {"viewer", "svc-a"}:
                break
            await asyncio.sleep(0.1)
    assert {(r["actor_id"], r["outcome"]) for r in audit["items"]} >= {
        ("viewer", "DENIED"),
        ("svc-a", "DENIED"),
    }


async def test_artifact_downloads_are_scoped_and_audited(cluster: ReadCluster):
    mine = next(job for job, caller in cluster.jobs.items() if caller == "svc-a")
    async with cluster.api(1, "svc-a") as service, cluster.api(0, "svc-b") as stranger:
        job = (await answered(service, "GET", f"/jobs/{mine}")).json()
        path = job["artifacts"][0]["download_path"]
        download = await answered(service, "GET", path)
        assert download.status_code == 200
        assert download.content.startswith(b"page /page/read-")
        assert download.headers["content-type"].startswith("text/html")
        assert (await answered(stranger, "GET", path)).status_code == 404
        assert UUID(job["attempts"][-1]["lease_id"])  # the attempt's identity
    async with cluster.api(0, "viewer") as viewer:
        for _ in range(100):
            audit = (
                await answered(
                    viewer, "GET", "/audit", params={"target": path.replace("/artifacts/", "artifact:")}
                )
            ).json()
            outcomes = {(r["actor_id"], r["outcome"], r["audit_id"]) for r in audit["items"]}
            if {"ALLOWED", "DENIED"} <= {outcome for _, outcome, _ in outcomes}:
                break
            await asyncio.sleep(0.1)
    # The download answered with the id of its audit record, to match it with storage access logs.
    assert ("svc-a", "ALLOWED", download.headers["x-audit-id"]) in outcomes
    assert "svc-b" in {actor for actor, outcome, _ in outcomes if outcome == "DENIED"}


async def test_redrive_runs_a_dead_letter_again_once_its_origin_is_mended(
    cluster: ReadCluster, origin: Origin
):
    job_id = await cluster.submit("svc-a", origin.url("/broken/redrive"))
    first = await cluster.system.completion(job_id)
    assert first.status.value == "DEAD_LETTER"
    async with cluster.api(0, "operator") as operator, cluster.api(1, "admin") as admin:
        refused = await answered(operator, "POST", f"/jobs/{job_id}/redrive", json={"reason": "retry"})
        assert refused.status_code == 403
        origin.mended.set()
        redriven = await answered(admin, "POST", f"/jobs/{job_id}/redrive", json={"reason": "origin fixed"})
        assert redriven.status_code == 200, redriven.text
        for _ in range(300):
            job = (await answered(admin, "GET", f"/jobs/{job_id}")).json()
            if job["state"] == "SUCCEEDED":
                break
            await asyncio.sleep(0.1)
        assert job["state"] == "SUCCEEDED"
        assert job["totals"]["attempts"] > job["totals"]["budget_spent"]
        again = await answered(admin, "POST", f"/jobs/{job_id}/redrive", json={"reason": "twice"})
        assert again.status_code == 409


async def test_history_delete_is_refused_while_the_job_can_run_and_done_after(
    cluster: Cluster, origin: Origin
):
    job_id = await cluster.submit("svc-a", origin.url("/slow/delete"))
    await cluster.system.events.wait_for(lambda _: "JobAccepted" in cluster.system.event_kinds(job_id))
    async with cluster.api(0, "admin") as admin:
        refused = await answered(admin, "POST", f"/jobs/{job_id}/delete-history", json={"reason": "gdpr"})
        assert refused.status_code == 409
        assert "can still run" in refused.json()["message"]
        assert (await answered(admin, "GET", f"/jobs/{job_id}")).status_code == 200
        origin.release.set()
        await cluster.system.completion(job_id)
        for _ in range(100):
            deleted = await answered(admin, "POST", f"/jobs/{job_id}/delete-history", json={"reason": "gdpr"})
            if deleted.status_code != 409:  # its callback-free completion may still be folding
                break
            await asyncio.sleep(0.1)
        assert deleted.status_code == 200, deleted.text
        assert (await answered(admin, "GET", f"/jobs/{job_id}")).status_code == 404
        audit = (await answered(admin, "GET", "/audit", params={"target": job_target(job_id)})).json()[
            "items"
        ]
        assert "JOB_HISTORY_DELETE" in {record["action"] for record in audit}


async def test_metrics_parse_and_move_with_the_work(cluster: ReadCluster, origin: Origin):
    async def summed(name: str, label: str, matches: Callable[[str], bool]) -> float:
        total = 0.0
        for index in (0, 1):
            async with cluster.api(index, "viewer") as viewer:
                text = (await viewer.get("/metrics")).text
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    if sample.name == name and matches(sample.labels[label]):
                        total += sample.value
        return total

    def accepted() -> Awaitable[float]:
        return summed("scrapestream_events_folded_total", "type", lambda kind: kind == "JobAccepted")

    def completions_written() -> Awaitable[float]:
        return summed("scrapestream_produced_records", "topic", lambda topic: topic.endswith(".completions"))

    before, completions_before = await accepted(), await completions_written()
    job_id = await cluster.submit("svc-b", origin.url("/page/metrics"))
    await cluster.system.completion(job_id)
    assert await accepted() == before + 1
    assert await completions_written() == completions_before + 1
    async with cluster.api(0, None) as anonymous, cluster.api(0, "svc-a") as service:
        assert (await anonymous.get("/metrics")).status_code == 401
        assert (await service.get("/metrics")).status_code == 403  # it counts every caller's jobs
    async with cluster.api(0, "viewer") as viewer:
        families = {
            family.name for family in text_string_to_metric_families((await viewer.get("/metrics")).text)
        }
    expected = {
        "scrapestream_jobs",
        "scrapestream_attempts",
        "scrapestream_fetch_duration_seconds",
        "scrapestream_callback_deliveries",
        "scrapestream_dead_input_records",
        "scrapestream_consumer_lag",
    }
    assert expected <= families


def _partition(job_id: UUID) -> int:
    return partition_of(str(job_id).encode(), 4)


async def test_the_openapi_document_is_valid_and_every_route_answers_as_it_documents(
    cluster: Cluster, origin: Origin
):
    job_id = await cluster.submit("svc-a", origin.url("/page/walk"))
    await cluster.system.completion(job_id)
    async with cluster.api(1, "admin") as admin, cluster.api(1, None) as anonymous:
        document = (await admin.get("/openapi.json")).json()
        validate_spec(document)
        assert (await admin.get("/docs")).status_code == 200
        job = (await answered(admin, "GET", f"/jobs/{job_id}")).json()
        watched = {
            "name": "walk",
            "caller_identity": "svc-a",
            "url": origin.url("/page/walk"),
            "every_s": 3600,
        }
        monitor = (await answered(admin, "POST", "/monitors", json=watched)).json()
        # A job type no test here submits: the walk switches it off, then on again (posts in order).
        samples = {
            "job_id": str(job_id),
            "artifact_id": job["artifacts"][0]["artifact_id"],
            "name": "browser.render",
            "lease_id": str(uuid4()),
            "monitor_id": monitor["monitor_id"],
            "check_job_id": str(uuid4()),  # no visual change of the monitor's: its image is not there
        }
        unknown = {"job_id": str(uuid4()), "artifact_id": str(uuid4()), "name": "no.such-type"}
        unknown["monitor_id"] = str(uuid4())
        unknown["lease_id"] = str(uuid4())
        unknown["check_job_id"] = str(uuid4())
        routes = sorted(
            (
                (method, path, operation)
                for path, item in document["paths"].items()
                for method, operation in item.items()
            ),
            key=lambda route: route[0] == "post",  # history delete last: it removes the job
        )
        assert {path for _, path, _ in routes} >= {
            "/jobs/{job_id}",
            "/jobs/{job_id}/events",
            "/jobs",
            "/dead-letters",
            "/audit",
            "/artifacts/{artifact_id}",
            "/healthz",
            "/readyz",
            "/metrics",
            "/jobs/{job_id}/cancel",
            "/jobs/{job_id}/redrive",
            "/jobs/{job_id}/delete-history",
        }
        for method, path, operation in routes:
            body = {"reason": "walk"} if method == "post" else None
            for client, values in ((admin, samples), (admin, unknown), (anonymous, samples)):
                response = await answered(client, method.upper(), path.format(**values), json=body)
                conforms(document, operation, response, f"{method} {path}")


def conforms(
    document: dict[str, Any], operation: dict[str, Any], response: httpx.Response, route: str
) -> None:
    documented = operation["responses"].get(str(response.status_code))
    assert documented is not None, f"{route} answered an undocumented {response.status_code}: {response.text}"
    content = documented.get("content", {})
    if "application/json" in content:
        schema = {**content["application/json"]["schema"], "components": document["components"]}
        Draft202012Validator(schema).validate(response.json())
    elif "text/plain" in content:
        assert response.headers["content-type"].startswith("text/plain")
    else:
        assert response.content, f"{route} answered {response.status_code} with no body"
