"""Attacks on a deployment with auth on (two workers), as a hostile SERVICE principal makes them.

Each test acts as the attacker would: its own token on the HTTP API, its own signed records on the
submit topic, ids computed from what it can know (caller names, URLs). None of it may read another
caller's data, change another caller's job, or grow what another caller's job keeps.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

import httpx
import msgspec
import pytest
import pytest_asyncio

from projections.artifacts import content_key
from projections.lifecycle.identity import job_id_for, lease_id_for, name_based, refused_job_id_for
from projections.lifecycle.monitors import monitor_id_for
from schemas.commands import (
    CancelJob,
    CreateMonitor,
    DeleteJobHistory,
    PauseMonitor,
    RedriveJob,
    ReplayCallback,
    SubmitJob,
)
from schemas.enums import ActorRole, AnswerKind, ChangeKind, JobStatus, RetentionClass
from schemas.events import AuditRecorded, JobRejected, JobSucceeded, SubmissionReused
from schemas.records import MonitorSchedule, MonitorSpec, Request
from streams.auth.peering import PeerKey
from streams.auth.principals import Principal
from streams.auth.signing import Binding, private_key_from_text, sign
from streams.clock import utc_now
from streams.runtime.publisher import Outgoing, Publisher, outgoing, partition_of
from tests.commands import run
from tests.console_sessions import console_cookies, session_csrf
from tests.e2e.cluster import Cluster, answered, auth_on, running_cluster
from tests.e2e.conftest import Observer, Origin, running_system, worker_settings
from tests.principals import ISSUED

pytestmark = pytest.mark.asyncio(loop_scope="module")
PEER_SECRET = "the-peer-secret-of-the-trust-tests-0123456789abcdef"
REFUSALS_PER_MINUTE = 40
MONITORS_PER_CALLER = 3


@dataclass
class Deployment(Cluster):
    publisher: Publisher  # sends what a hostile principal crafts by hand

    def signed(self, signer: str, command: Any, topic: str | None = None) -> Outgoing:
        """`command` as `signer` publishes it by hand, signed for `topic` (the submit topic)."""
        topic = topic or self.settings.topic("submit")
        message = outgoing(self.settings.topic("submit"), str(uuid4()), command)
        key = private_key_from_text(ISSUED[signer].signing_key)
        headers = sign(signer, key, message.value, Binding(self.settings.deployment_id, topic))
        return Outgoing(message.topic, message.key, message.value, headers=tuple(headers))

    async def events_of(self, job_id: UUID) -> list[dict[str, Any]]:
        async with self.api(0, "admin") as admin:
            answer = await answered(admin, "GET", f"/jobs/{job_id}/events")
        assert answer.status_code == 200, answer.text
        items: list[dict[str, Any]] = answer.json()["items"]
        return items


def expires(minutes: float = 5) -> Any:
    return utc_now() + timedelta(minutes=minutes)


def signable_submission(caller: str, key: str, url: str) -> SubmitJob:
    """A submission as a signer publishes it by hand: with the command id and expiry signing needs."""
    return SubmitJob(
        command_id=uuid4(),
        caller_identity=caller,
        idempotency_key=key,
        request=Request(url=url),
        deadline_at=expires(60),
        expires_at=expires(),
    )


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def deployment(broker, origin: Origin, tmp_path_factory) -> AsyncIterator[Deployment]:
    root = tmp_path_factory.mktemp("trust")
    settings = auth_on(
        broker.bootstrap,
        root / "a",
        partitions=4,
        peer_secret=PEER_SECRET,
        deployment_id="trust-tests",
        refusals_per_minute=REFUSALS_PER_MINUTE,
        max_monitors_per_caller=MONITORS_PER_CALLER,
    )
    async with running_cluster(settings, root / "b") as running:
        publisher = Publisher(settings.kafka_access, broker.profile)
        await publisher.start()
        try:
            yield Deployment(**vars(running), publisher=publisher)
        finally:
            await publisher.stop()


async def test_no_internal_route_answers_a_callers_token_or_a_forged_peer_credential(
    deployment: Deployment, origin: Origin
):
    job_id = await deployment.submit("svc-a", origin.url("/page/internal-routes"))
    assert (await deployment.system.completion(job_id)).status is JobStatus.SUCCEEDED
    async with deployment.api(0, "admin") as admin:
        artifact = (await answered(admin, "GET", f"/jobs/{job_id}")).json()["artifacts"][0]
    key = content_key(artifact["sha256"], RetentionClass.CACHE_7D)
    internal = [
        "/_shard/jobs",
        "/_shard/audit",
        f"/_shard/artifacts/{artifact['artifact_id']}",
        f"/_shard/artifact-bytes/{key}",
    ]
    forged = PeerKey(b"not-the-deployments-secret-but-long-enough").headers(
        "GET", internal[2], Principal("svc-b", ActorRole.ADMIN), int(utc_now().timestamp())
    )
    for worker in (0, 1):
        for principal in ("svc-b", "admin", None):
            async with deployment.api(worker, principal) as http:
                for path in internal:
                    answer = await http.get(path)
                    assert answer.status_code == 403, (path, principal, answer.text)
                    assert answer.json()["code"] == "forbidden"
        async with deployment.api(worker, None) as anonymous:
            assert (await anonymous.get(internal[2], headers=forged)).status_code == 403
    async with deployment.api(1, "svc-b") as stranger, deployment.api(0, "svc-a") as owner:
        assert (await answered(stranger, "GET", artifact["download_path"])).status_code == 404
        download = await answered(owner, "GET", artifact["download_path"])
        assert download.status_code == 200
        assert download.headers["content-security-policy"] == "sandbox"


async def test_refused_commands_with_the_ids_of_a_jobs_own_reports_cannot_make_it_fail(
    deployment: Deployment, origin: Origin
):
    submitted = await deployment.submit("svc-a", origin.url("/slow/steered"), idempotency_key="steered")
    assert submitted == job_id_for("svc-a", "steered")  # what anyone can work out
    lease = lease_id_for(submitted, 1)
    predictable = [
        name_based(lease, "report"),
        *(name_based(lease, label) for label in ("start", "renew:1", "renew:2")),
    ]
    attacks = [
        deployment.signed(
            "svc-b",
            CancelJob(
                command_id=command_id,
                job_id=submitted,
                actor_id="svc-b",
                actor_role=ActorRole.SERVICE,
                reason="x" * 1_000,
                expires_at=expires(),
            ),
        )
        for command_id in predictable
    ]
    await deployment.publisher.send_all(attacks)
    await deployment.system.events.wait_for(
        lambda _: "JobAccepted" in deployment.system.event_kinds(submitted)
    )
    origin.release.set()
    completion = await deployment.system.completion(submitted)
    assert completion.status is JobStatus.SUCCEEDED
    succeeded = [event for event in await deployment.events_of(submitted) if event["type"] == "JobSucceeded"]
    assert [event["data"]["attempt"]["attempt_number"] for event in succeeded] == [1]  # its report decided
    assert all(event.get("actor_id") != "svc-b" for event in await deployment.events_of(submitted))


async def test_nothing_another_principal_does_grows_a_callers_job(deployment: Deployment, origin: Origin):
    job_id = await deployment.submit("svc-a", origin.url("/page/bounded"), idempotency_key="bounded")
    await deployment.system.completion(job_id)
    before = await deployment.events_of(job_id)
    cancels = [
        deployment.signed(
            "svc-b",
            CancelJob(
                command_id=uuid4(),
                job_id=job_id,
                actor_id="svc-b",
                actor_role=ActorRole.SERVICE,
                reason="r" * 1_024,
                expires_at=expires(),
            ),
        )
        for _ in range(200)
    ]
    impostor = signable_submission("svc-a", "bounded", origin.url("/page/bounded"))
    await deployment.publisher.send_all([*cancels, deployment.signed("svc-b", impostor)])
    statuses = []
    async with deployment.api(1, "svc-b") as stranger:
        for _ in range(REFUSALS_PER_MINUTE + 10):
            statuses.append((await stranger.get(f"/jobs/{job_id}")).status_code)
    assert set(statuses) <= {404, 429, 503}
    assert 429 in statuses  # past its refusals a minute, the prober is held off
    refused = await deployment.system.events.wait_for(
        lambda records: (
            sum(
                isinstance(r, AuditRecorded) and r.actor_id == "svc-b" and r.target == f"job:{job_id}"
                for r in records
            )
            >= 200
        ),
        timeout_s=120,
    )
    assert all(r.job_id != job_id for r in refused if isinstance(r, AuditRecorded) and r.actor_id == "svc-b")
    assert not any(isinstance(r, SubmissionReused) and r.job_id == job_id for r in refused)
    assert await deployment.events_of(job_id) == before


async def test_a_signed_command_is_decided_once_and_only_where_and_while_it_is_valid(
    deployment: Deployment, origin: Origin
):
    job_id = await deployment.submit("svc-a", origin.url("/page/replayed"))
    await deployment.system.completion(job_id)

    def cancel(**fields: Any) -> CancelJob:
        values = {
            "command_id": uuid4(),
            "job_id": job_id,
            "actor_id": "svc-a",
            "actor_role": ActorRole.SERVICE,
        }
        return CancelJob(**(values | {"reason": "replay", "expires_at": expires()} | fields))

    once = deployment.signed("svc-a", cancel(reason="once"))
    await deployment.publisher.send_all([once, once, once])
    refused = [
        deployment.signed("svc-a", cancel(reason="expired", expires_at=utc_now() - timedelta(seconds=1))),
        deployment.signed("svc-a", cancel(reason="no id", command_id=None)),
        deployment.signed("svc-a", cancel(reason="no expiry", expires_at=None)),
        deployment.signed("svc-a", cancel(reason="too long", expires_at=expires(60))),
        deployment.signed("svc-a", cancel(reason="elsewhere"), topic="other-deployment.submit"),
    ]
    await deployment.publisher.send_all(refused)
    dead = await deployment.system.dead_input.wait_for(
        lambda records: sum("refused" in r.reason for r in records) >= len(refused)
    )
    reasons = " | ".join(r.reason for r in dead)
    for expected in ("expired", "needs a command_id", "needs expires_at", "more than", "another topic"):
        assert expected in reasons
    audits = await deployment.system.events.wait_for(
        lambda records: any(isinstance(r, AuditRecorded) and r.reason == "once" for r in records)
    )
    await asyncio.sleep(0)  # the three copies were published together: all are decided by now
    assert sum(isinstance(r, AuditRecorded) and r.reason == "once" for r in audits) == 1


async def test_another_callers_job_and_no_job_at_all_are_answered_alike(
    deployment: Deployment, origin: Origin
):
    theirs = await deployment.submit("svc-a", origin.url("/page/hidden"))
    await deployment.system.completion(theirs)
    async with deployment.api(0, "svc-c") as stranger:
        for path in ("/jobs/{}", "/jobs/{}/events"):
            hidden = await answered(stranger, "GET", path.format(theirs))
            missing = await answered(stranger, "GET", path.format(uuid4()))
            assert hidden.status_code == missing.status_code == 404
            assert hidden.json()["code"] == missing.json()["code"]
        cancel = await answered(stranger, "POST", f"/jobs/{theirs}/cancel", json={"reason": "probe"})
        nothing = await answered(stranger, "POST", f"/jobs/{uuid4()}/cancel", json={"reason": "probe"})
        assert cancel.status_code in (404, 429)
        assert nothing.status_code in (404, 429)


async def test_a_signed_submission_naming_no_submitter_is_decided_on_its_signers_stream_partition(
    deployment: Deployment, origin: Origin
):
    # The signer's name is set by intake; the command is routed by the job it then is.
    command = signable_submission("svc-a", "signed-by-another", origin.url("/page/signed-by-another"))
    await deployment.publisher.send_all([deployment.signed("svc-b", command)])
    job_id = refused_job_id_for("svc-b", "svc-a", "signed-by-another")
    completion = await deployment.system.completion(job_id)
    assert completion.failure.code == "NOT_PERMITTED"
    events = deployment.system.events  # appended after the completion is published: wait for them
    await events.wait_for(
        lambda records: any(isinstance(r, JobRejected) and r.job_id == job_id for r in records)
    )
    seen = len(events.records)
    placed = {
        raw.partition
        for raw, event in zip(events.raw[:seen], events.records[:seen], strict=True)
        if getattr(event, "job_id", None) == job_id
    }
    assert placed == {partition_of(str(job_id).encode(), deployment.settings.partitions)}
    async with deployment.api(0, "admin") as admin:
        assert (await answered(admin, "GET", f"/jobs/{job_id}")).json()["state"] == "REJECTED"


async def test_a_submission_as_another_caller_never_touches_that_callers_job(
    deployment: Deployment, origin: Origin
):
    url = origin.url("/page/impersonated")
    victim = await deployment.submit("svc-a", url, idempotency_key="impersonated")
    await deployment.system.completion(victim)
    before = await deployment.events_of(victim)
    command = SubmitJob(
        caller_identity="svc-a",
        idempotency_key="impersonated",
        request=Request(url=url),
        deadline_at=expires(60),
    )
    job_id = await deployment.clients["svc-b"].submit(command)
    assert job_id == victim
    completion = await deployment.clients["svc-b"].wait_for(job_id)
    assert completion.status is JobStatus.REJECTED
    assert completion.failure is not None
    assert completion.failure.code == "NOT_PERMITTED"
    assert completion.job_id != victim
    assert await deployment.events_of(victim) == before
    assert not any(
        isinstance(e, JobSucceeded) and e.job_id == completion.job_id
        for e in deployment.system.events.records
    )


async def test_a_service_submits_over_http_as_itself_and_never_as_another(
    deployment: Deployment, origin: Origin
):
    body = {"caller_identity": "svc-a", "url": origin.url("/page/over-http"), "idempotency_key": "http-1"}
    async with deployment.api(1, "svc-a") as service:
        created = await answered(service, "POST", "/jobs", json=body)
        assert created.status_code == 201, created.text
        job_id = UUID(created.json()["job_id"])
        assert created.json()["submission"] == "created"
        again = await answered(service, "POST", "/jobs", json=body)
        assert (again.status_code, again.json()["submission"]) == (200, "reused")
        other = await answered(service, "POST", "/jobs", json=body | {"url": origin.url("/page/other")})
        assert other.status_code == 422
        assert other.json()["reason"] == "IDEMPOTENCY_KEY_REUSED"
        impostor = await answered(service, "POST", "/jobs", json=body | {"caller_identity": "svc-b"})
        assert impostor.status_code == 422
        assert impostor.json()["reason"] == "NOT_PERMITTED"
        assert UUID(impostor.json()["job_id"]) != job_for("svc-b", "http-1")
        malformed = await answered(service, "POST", "/jobs", json={"url": 3})
        assert malformed.status_code == 400
    assert (await deployment.system.completion(job_id)).status is JobStatus.SUCCEEDED


def job_for(caller: str, key: str) -> UUID:
    return job_id_for(caller, key)


async def test_a_console_session_signed_out_on_one_worker_ends_on_every_worker(deployment: Deployment):
    bases = [f"http://127.0.0.1:{worker.web_port}" for worker in deployment.workers]
    cookies = await console_cookies(bases[0], ISSUED["viewer"].token)
    for base in bases:  # every worker verifies the session another one started
        async with httpx.AsyncClient(base_url=base, cookies=cookies) as browser:
            assert (await browser.get("/ui/jobs")).status_code == 200
    async with httpx.AsyncClient(base_url=bases[0], cookies=cookies) as browser:
        assert (
            await browser.post("/ui/logout", data={"csrf": await session_csrf(browser)})
        ).status_code == 303
    for base in bases:
        async with httpx.AsyncClient(base_url=base, cookies=cookies) as replayed:
            answer = await replayed.get("/ui/jobs")
        assert answer.status_code == 303, base
        assert answer.headers["location"].startswith("/ui/login")


async def test_the_cli_says_an_unsigned_command_was_refused_and_submits_as_its_signer(
    deployment: Deployment, origin: Origin, tmp_path
):
    given = {
        "kafka_bootstrap": deployment.settings.kafka_bootstrap,
        "broker_profile": deployment.settings.broker_profile,
        "topic_prefix": deployment.settings.topic_prefix,
        "deployment_id": deployment.settings.deployment_id,
    }
    code, output = await run("submit", origin.url(f"/page/{uuid4().hex}"), cwd=tmp_path, **given)
    assert code == 2, output  # a mistake in the settings, said at once rather than after 30 s
    assert "auth on and takes signed commands only" in output
    assert "SCRAPESTREAM_PRINCIPAL" in output
    signed = given | {"principal": "svc-a", "signing_key": ISSUED["svc-a"].signing_key}
    code, output = await run("submit", origin.url(f"/page/{uuid4().hex}"), "--json", cwd=tmp_path, **signed)
    assert code == 0, output
    created = json.loads(output[output.index("{") :])
    assert created["submission"] == "created"
    async with deployment.api(0, "svc-a") as svc_a:
        job = await answered(svc_a, "GET", f"/jobs/{created['job_id']}")
        assert job.status_code == 200, job.text
        assert job.json()["caller_identity"] == "svc-a"  # its signer, not "cli"
        code, output = await run(
            "submit",
            origin.url(f"/page/{uuid4().hex}"),
            "--caller",
            "svc-b",
            "--json",
            cwd=tmp_path,
            **signed,
        )
        assert code == 1, output
        refused = json.loads(output[output.index("{") :])
        assert refused["reason"] == "NOT_PERMITTED"
        shown = await answered(svc_a, "GET", f"/jobs/{refused['job_id']}")  # the id it names is readable
        assert shown.status_code == 200, shown.text
        assert shown.json()["state"] == "REJECTED"


async def test_a_signed_mutation_of_another_callers_job_or_monitor_is_answered_as_one_of_nothing(
    deployment: Deployment, origin: Origin
):
    theirs = await deployment.submit("svc-a", origin.url("/page/probed"))
    await deployment.system.completion(theirs)
    async with deployment.api(0, "svc-a") as owner:
        created = await answered(
            owner, "POST", "/monitors", json={"name": "probed", "url": origin.url("/page/m"), "every_s": 3600}
        )
    assert created.status_code in (200, 201), created.text
    monitor = UUID(created.json()["monitor_id"])
    answers = Observer(deployment.settings.kafka_access, deployment.settings.topic("answers"))
    await answers.start()
    try:
        common = {
            "actor_id": "svc-c",
            "actor_role": ActorRole.SERVICE,
            "expires_at": expires(),
            "reason": "probe",
        }
        probes = []
        for target in (theirs, uuid4(), monitor, uuid4()):
            for kind in (CancelJob, RedriveJob, DeleteJobHistory, ReplayCallback):
                probes.append(kind(command_id=uuid4(), job_id=target, **common))
        await deployment.publisher.send_all([deployment.signed("svc-c", probe) for probe in probes])
        wanted = {probe.command_id for probe in probes}
        found = await answers.wait_for(
            lambda records: wanted <= {getattr(r, "command_id", None) for r in records}
        )
        by_id = {
            record.command_id: record for record in found if getattr(record, "command_id", None) in wanted
        }
        seen = [
            (by_id[p.command_id].answer, by_id[p.command_id].job_status, by_id[p.command_id].reason)
            for p in probes
        ]
    finally:
        await answers.stop()
    job, none, their_monitor, none_again = seen[0:4], seen[4:8], seen[8:12], seen[12:16]
    assert job == none  # the same kind, no status, the same reason: nothing says the job exists
    assert their_monitor == none_again
    assert all(status is None for _, status, _ in seen)


async def test_an_answer_planted_with_anothers_ids_names_whose_record_it_answers(
    deployment: Deployment, origin: Origin
):
    mine = signable_submission("svc-a", uuid4().hex, origin.url("/page/planted"))
    planted = msgspec.structs.replace(mine, caller_identity="svc-c", idempotency_key=uuid4().hex)
    correlation = [("scrapestream-correlation-id", b"svc-a-request-1")]
    sent = []
    for signer, command in (("svc-a", mine), ("svc-c", planted)):
        message = deployment.signed(signer, command)
        sent.append(replace(message, key=b"svc-a-key", headers=(*message.headers, *correlation)))
    answers = Observer(deployment.settings.kafka_access, deployment.settings.topic("answers"))
    await answers.start()
    try:
        await deployment.publisher.send_all(sent)
        found = await answers.wait_for(
            lambda records: sum(getattr(r, "command_id", None) == mine.command_id for r in records) >= 2
        )
    finally:
        await answers.stop()
    both = [record for record in found if getattr(record, "command_id", None) == mine.command_id]
    assert {record.correlation_id for record in both} == {"svc-a-request-1"}  # the ids alone cannot tell
    assert sorted(record.principal for record in both) == ["svc-a", "svc-c"]
    (own,) = [record for record in both if record.principal == "svc-a"]  # as CONTRACT says to match
    assert own.job_id == job_for("svc-a", mine.idempotency_key or "")


async def test_a_jobs_creation_audit_names_the_request_that_made_it(deployment: Deployment, origin: Origin):
    async with deployment.api(0, "svc-a") as http:
        made = await answered(
            http,
            "POST",
            "/jobs",
            json={"caller_identity": "svc-a", "url": origin.url(f"/page/{uuid4().hex}")},
            headers={"X-Request-Id": "req-from-the-gateway-42"},
        )
    assert made.status_code == 201, made.text
    over_http = made.json()["job_id"]
    sent = signable_submission("svc-a", uuid4().hex, origin.url(f"/page/{uuid4().hex}"))
    await deployment.publisher.send_all([deployment.signed("svc-a", sent)])
    over_kafka = job_for("svc-a", sent.idempotency_key or "")
    async with deployment.api(0, "admin") as admin:
        for job_id, expected in ((over_http, "req-from-the-gateway-42"), (over_kafka, str(sent.command_id))):
            for _ in range(300):
                items = (await admin.get("/audit", params={"target": f"job:{job_id}"})).json()["items"]
                created = [item for item in items if item["action"] == "JOB_CREATE"]
                if created:
                    break
                await asyncio.sleep(0.1)
            assert [item["request_id"] for item in created] == [expected]


async def test_a_caller_holds_at_most_its_quota_of_monitors_across_workers(
    deployment: Deployment, origin: Origin
):
    async with deployment.api(0, "svc-b") as http:

        async def create(name: str) -> httpx.Response:
            body = {"name": name, "url": origin.url(f"/page/{name}"), "every_s": 3600}
            return await answered(http, "POST", "/monitors", json=body)

        made = [await create(f"quota-{n}") for n in range(MONITORS_PER_CALLER)]  # spread over both workers
        assert [answer.status_code for answer in made] == [201] * MONITORS_PER_CALLER
        refused = await create("one-too-many")
        assert refused.status_code == 409
        assert refused.json()["code"] == "quota"
        assert "SCRAPESTREAM_MAX_MONITORS_PER_CALLER" in refused.json()["message"]
        assert (await create("quota-0")).status_code == 200  # the same monitor again is no new one
        monitor_id = made[0].json()["monitor_id"]
        assert (await answered(http, "DELETE", f"/monitors/{monitor_id}")).status_code in (200, 204)
        assert (await create("one-too-many")).status_code == 201  # a deleted one no longer counts


async def test_every_change_of_a_monitor_and_every_refusal_is_in_the_audit(
    deployment: Deployment, origin: Origin
):
    async with deployment.api(0, "svc-a") as owner, deployment.api(1, "svc-b") as stranger:
        body = {"name": "audited", "url": origin.url("/page/audited"), "every_s": 3600}
        created = await answered(owner, "POST", "/monitors", json=body, headers={"X-Request-Id": "req-made"})
        assert created.status_code == 201, created.text
        monitor_id = created.json()["monitor_id"]
        path = f"/monitors/{monitor_id}"
        paused = await answered(owner, "POST", f"{path}/pause", json={"reason": "site maintenance"})
        assert paused.status_code == 200, paused.text
        assert (
            await answered(stranger, "POST", f"{path}/resume", json={"reason": "mine now"})
        ).status_code == 404
        assert (await answered(owner, "PATCH", path, json={"every_s": 1})).status_code == 400
        assert (await answered(owner, "DELETE", path)).status_code == 200
        assert (await answered(owner, "PATCH", path, json={"every_s": 60})).status_code == 409
    expected = {
        ("svc-a", "MONITOR_CREATE", "ALLOWED", ""),
        ("svc-a", "MONITOR_PAUSE", "ALLOWED", ""),
        ("svc-b", "MONITOR_RESUME", "DENIED", "not_found"),
        ("svc-a", "MONITOR_EDIT", "DENIED", "invalid"),
        ("svc-a", "MONITOR_DELETE", "ALLOWED", ""),
        ("svc-a", "MONITOR_EDIT", "DENIED", "conflict"),
    }
    async with deployment.api(0, "admin") as admin:
        for _ in range(300):
            items = (await admin.get("/audit", params={"target": f"monitor:{monitor_id}"})).json()["items"]
            seen = {(i["actor_id"], i["action"], i["outcome"], i["refusal"]) for i in items}
            if seen >= expected:
                break
            await asyncio.sleep(0.1)
    assert seen == expected
    by_action = {(i["action"], i["outcome"]): i for i in items}
    assert by_action["MONITOR_CREATE", "ALLOWED"]["request_id"] == "req-made"
    assert by_action["MONITOR_PAUSE", "ALLOWED"]["reason"] == "site maintenance"
    assert by_action["MONITOR_RESUME", "DENIED"]["reason"] == "mine now"


async def test_a_signed_producer_runs_a_monitor_on_the_submit_topic_and_reads_its_changes(
    deployment: Deployment, origin: Origin
):
    spec = MonitorSpec(request=Request(url=origin.url("/visits/kafka")), schedule=MonitorSchedule(every_s=10))
    create = CreateMonitor(
        command_id=uuid4(), caller_identity="svc-a", name="over-kafka", spec=spec, expires_at=expires()
    )
    monitor_id = monitor_id_for("svc-a", "over-kafka")
    unusable = msgspec.structs.replace(
        create, command_id=uuid4(), name="unusable", spec=msgspec.structs.replace(spec, watch=("p >>> x",))
    )
    stranger = PauseMonitor(
        command_id=uuid4(), monitor_id=monitor_id, actor_id="svc-b", actor_role=ActorRole.SERVICE,
        reason="mine now", expires_at=expires(),
    )  # fmt: skip
    pause = msgspec.structs.replace(stranger, command_id=uuid4(), actor_id="svc-a", reason="enough")
    answers = Observer(deployment.settings.kafka_access, deployment.settings.topic("answers"))
    changes = Observer(deployment.settings.kafka_access, deployment.settings.topic("changes"))
    await answers.start()
    await changes.start()
    try:
        await deployment.publisher.send_all([deployment.signed("svc-a", create)])
        found = await changes.wait_for(
            lambda records: sum(getattr(r, "monitor_id", None) == monitor_id for r in records) >= 2, 90
        )
        sent = [deployment.signed("svc-b", stranger), deployment.signed("svc-a", pause)]
        sent.append(deployment.signed("svc-a", unusable))
        await deployment.publisher.send_all(sent)
        ids = {create.command_id, stranger.command_id, pause.command_id, unusable.command_id}
        answered_all = await answers.wait_for(
            lambda records: {getattr(r, "command_id", None) for r in records} >= ids, 60
        )
    finally:
        await answers.stop()
        await changes.stop()
    kinds = [change.kind for change in found if change.monitor_id == monitor_id]
    assert kinds[:2] == [ChangeKind.NEW, ChangeKind.CHANGED]
    by_command = {r.command_id: r for r in answered_all if getattr(r, "command_id", None) in ids}
    assert (by_command[create.command_id].answer, by_command[create.command_id].job_id) == (
        AnswerKind.CREATED,
        monitor_id,
    )
    assert by_command[stranger.command_id].answer is AnswerKind.REFUSED
    assert by_command[stranger.command_id].job_status is None  # another's monitor is answered as none
    assert by_command[pause.command_id].answer is AnswerKind.APPLIED
    assert by_command[unusable.command_id].answer is AnswerKind.REJECTED
    async with deployment.api(0, "svc-a") as owner:
        viewed = (await answered(owner, "GET", f"/monitors/{monitor_id}")).json()
    assert viewed["state"] == "paused"


async def test_a_producer_past_its_monitor_quota_on_the_submit_topic_is_answered_so(
    deployment: Deployment, origin: Origin
):
    spec = MonitorSpec(
        request=Request(url=origin.url("/page/quota-kafka")), schedule=MonitorSchedule(every_s=3600)
    )

    def creation(name: str) -> CreateMonitor:
        return CreateMonitor(
            command_id=uuid4(), caller_identity="svc-c", name=name, spec=spec, expires_at=expires()
        )

    held = [creation(f"kafka-quota-{n}") for n in range(MONITORS_PER_CALLER)]
    one_more = creation("kafka-quota-one-more")
    answers = Observer(deployment.settings.kafka_access, deployment.settings.topic("answers"))
    await answers.start()
    try:
        await deployment.publisher.send_all([deployment.signed("svc-c", command) for command in held])
        wanted = {command.command_id for command in held}
        await answers.wait_for(
            lambda records: {getattr(r, "command_id", None) for r in records} >= wanted, 60
        )
        await deployment.publisher.send_all([deployment.signed("svc-c", one_more)])
        found = await answers.wait_for(
            lambda records: any(getattr(r, "command_id", None) == one_more.command_id for r in records), 60
        )
    finally:
        await answers.stop()
    by_command = {r.command_id: r for r in found if getattr(r, "command_id", None) is not None}
    assert [by_command[command.command_id].answer for command in held] == [AnswerKind.CREATED] * len(held)
    refused = by_command[one_more.command_id]
    assert refused.answer is AnswerKind.DEAD_INPUT
    assert "SCRAPESTREAM_MAX_MONITORS_PER_CALLER" in (refused.reason or "")


async def test_one_callers_slow_jobs_never_take_the_fetch_places_another_callers_job_needs(
    broker, origin: Origin, tmp_path
):
    settings = worker_settings(
        broker.bootstrap,
        tmp_path,
        profiles={"http.fetch": (60_000, 3)},  # a held fetch ends at its policy's 30 s timeout
        host_concurrency=64,  # the hog's host limit is not what holds the places here
    )
    async with running_system(settings) as system:
        hog_url = origin.url("/held/hog-{}").replace("127.0.0.1", "localhost")
        hog = [await system.submit(hog_url.format(n), caller_identity="svc-b") for n in range(20)]
        try:
            share = int(settings.executor_concurrency * settings.executor_caller_share)
            async with asyncio.timeout(120):
                while sum(hits for path, hits in origin.hits.items() if path.startswith("/held/")) < share:  # noqa: ASYNC110 - the origin counts
                    await asyncio.sleep(0.1)
            victim = await system.submit(origin.url("/page/beside-the-hog"), caller_identity="svc-a")
            # Before the hog's fetches time out (30 s): with every place held, the victim ends only then.
            assert (await system.completion(victim, timeout_s=25)).status is JobStatus.SUCCEEDED
        finally:
            origin.let_go.set()
        for job_id in hog:
            assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED
