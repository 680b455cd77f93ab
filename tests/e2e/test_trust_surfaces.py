"""The surfaces added since the first trust round, tried as a hostile caller would (auth on).

Each test acts as the attacker: its own token or none, raw sockets where a client library would
be polite, forms another site would post, ids it can compute. What it may not do: make a worker
hold memory or its event loop, read what another caller did, or use a session or a secret past
what it was given for.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
import pytest_asyncio
from aiohttp import web
from standardwebhooks import Webhook, WebhookVerificationError

from schemas.codec import decode
from streams.clock import utc_now
from streams.web.console.session import CSRF_COOKIE, SESSION_COOKIE
from tests.commands import run
from tests.console_sessions import console_cookies, login_csrf, session_csrf
from tests.e2e.cluster import answered
from tests.e2e.conftest import (
    CALLBACK_SECRET,
    Origin,
    System,
    callback_key,
    read_topic,
    running_system,
    worker_settings,
)
from tests.principals import ISSUED, PRINCIPALS
from tests.raw_http import head_of, raw_exchange
from tests.servers import loopback

pytestmark = pytest.mark.asyncio(loop_scope="module")
MIB = 1024 * 1024


@dataclass
class Deployment:
    system: System
    base: str
    port: int

    def api(self, principal: str | None = None, **options: Any) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {ISSUED[principal].token}"} if principal else {}
        return httpx.AsyncClient(base_url=self.base, headers=headers, timeout=30, **options)

    async def submit(self, principal: str, url: str, **fields: Any) -> dict[str, Any]:
        async with self.api(principal) as http:
            answer = await answered(
                http, "POST", "/jobs", json={"caller_identity": principal, "url": url, **fields}
            )
        assert answer.status_code in (200, 201, 422), answer.text
        found: dict[str, Any] = answer.json()
        return found

    async def finished(self, job_id: str, principal: str = "admin") -> dict[str, Any]:
        async with self.api(principal) as http:
            for _ in range(600):
                answer = await http.get(f"/jobs/{job_id}")
                if answer.status_code == 200 and answer.json()["state"] not in ("QUEUED", "LEASED"):
                    found: dict[str, Any] = answer.json()
                    return found
                await asyncio.sleep(0.1)
        raise AssertionError(f"job {job_id} did not finish")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def deployment(broker, origin: Origin, tmp_path_factory) -> AsyncIterator[Deployment]:
    settings = worker_settings(
        broker.bootstrap,
        tmp_path_factory.mktemp("surfaces"),
        auth_enabled=True,
        principals=PRINCIPALS,
        peer_secret="the-peer-secret-of-the-surface-tests-0123456789",
        deployment_id="surface-tests",
    )
    async with running_system(settings) as system:
        assert system.worker is not None
        port = system.worker.web_port
        yield Deployment(system, f"http://127.0.0.1:{port}", port)


async def test_no_body_is_read_before_its_sender_is_authenticated_and_none_past_its_limit(
    deployment: Deployment,
):
    port, huge = deployment.port, 160 * MIB
    # Step 1: a declared 160 MiB with no token or a wrong one: 401 before one byte of it is sent.
    for path in ("/jobs", "/jobs/00000000-0000-0000-0000-000000000000/cancel", "/callbacks/replay"):
        for token in (None, "not-a-token"):
            status, _ = await raw_exchange(port, head_of("POST", path, huge, token))
            assert status == 401, (path, token)
    # Step 2: an authenticated sender declaring more than the limit: 413 before the body is sent.
    status, _ = await raw_exchange(port, head_of("POST", "/jobs", huge, ISSUED["svc-a"].token))
    assert status == 413
    # Step 3: a body with no declared length is counted as it arrives.
    chunk = b"x" * 65_536
    stream = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(20))
    status, _ = await raw_exchange(port, head_of("POST", "/jobs", None, ISSUED["svc-a"].token), stream)
    assert status == 413
    # Step 4: the console's forms take 64 KiB, sign-in included, whoever sends them.
    for path in ("/ui/login", "/ui/logout", "/ui/jobs/x/cancel"):
        status, _ = await raw_exchange(port, head_of("POST", path, huge))
        assert status in (401, 413), path
        status, _ = await raw_exchange(port, head_of("POST", path, 65 * 1024), b"t" * 65 * 1024)
        assert status in (401, 413), path
    async with deployment.api() as http:
        assert (await http.get("/healthz")).status_code == 200
    answer = await deployment.submit("svc-a", "ftp://example.com/")
    assert answer["reason"] == "UNSUPPORTED_SCHEME"  # a body within the limit is read and decided


async def test_a_console_session_is_its_own_token_and_signing_out_ends_it(deployment: Deployment):
    cookies = await console_cookies(deployment.base, ISSUED["viewer"].token)
    session = cookies[SESSION_COOKIE]
    assert ISSUED["viewer"].token not in session
    async with deployment.api(cookies=cookies) as browser:
        assert (await browser.get("/ui/jobs")).status_code == 200
    async with httpx.AsyncClient(base_url=deployment.base) as thief:
        for header in (f"Bearer {session}", f"Bearer {session.split('.')[-1]}"):
            assert (await thief.get("/jobs", headers={"Authorization": header})).status_code == 401
        forged = {"x-scrapestream-console": session}  # the console's in-process header, from outside
        assert (await thief.get("/jobs", headers=forged)).status_code == 401
    async with deployment.api(cookies=cookies) as browser:
        answer = await browser.post("/ui/logout", data={"csrf": await session_csrf(browser)})
        assert answer.status_code == 303
    async with deployment.api(cookies=cookies) as replayed:  # the cookie as it was, kept by a thief
        answer = await replayed.get("/ui/jobs")
        assert answer.status_code == 303
        assert answer.headers["location"].startswith("/ui/login")
        refused = await replayed.post("/ui/jobs/x/cancel", data={"csrf": cookies[CSRF_COOKIE], "reason": "r"})
        assert refused.status_code == 401


async def test_another_site_can_neither_sign_a_browser_in_nor_out(deployment: Deployment):
    async with httpx.AsyncClient(base_url=deployment.base) as attacker:
        # The attacker's page posts its own token to the victim's console: no CSRF cookie comes along.
        answer = await attacker.post("/ui/login", data={"token": ISSUED["svc-b"].token, "next": "/ui"})
        assert answer.status_code == 403
        assert SESSION_COOKIE not in answer.cookies
        csrf = await login_csrf(attacker)
        answer = await attacker.post("/ui/login", data={"token": ISSUED["svc-b"].token, "csrf": csrf + "x"})
        assert answer.status_code == 403
    cookies = await console_cookies(deployment.base, ISSUED["viewer"].token)
    async with deployment.api(cookies={SESSION_COOKIE: cookies[SESSION_COOKIE]}) as victim:
        assert (await victim.post("/ui/logout", data={})).status_code == 403  # no CSRF token: refused
        assert (await victim.get("/ui/jobs")).status_code == 200  # and still signed in


async def test_a_csrf_pair_planted_in_the_browser_does_not_pass_with_the_victims_session(
    deployment: Deployment,
):
    cookies = await console_cookies(deployment.base, ISSUED["operator"].token)
    planted = "p" * 43  # a sibling host tossed this cookie, and puts the same value in its form
    jar = {SESSION_COOKIE: cookies[SESSION_COOKIE], CSRF_COOKIE: planted}
    async with deployment.api(cookies=jar) as victim:
        assert (await victim.post("/ui/logout", data={"csrf": planted})).status_code == 403
        assert (await victim.get("/ui/jobs")).status_code == 200  # still signed in
        page = (await victim.get("/ui/jobs")).text
        own = re.search(r'name="csrf" value="([^"]+)"', page)
        assert own is not None
        assert own.group(1) != planted  # the session's own token, whatever the cookie says
        assert (await victim.post("/ui/logout", data={"csrf": own.group(1)})).status_code == 303


async def test_an_image_in_the_console_keeps_its_sandbox(deployment: Deployment, origin: Origin):
    submitted = await deployment.submit("svc-a", origin.url("/png/console-sandbox"))
    job = await deployment.finished(submitted["job_id"])
    artifact = job["artifacts"][0]
    assert artifact["content_type"].startswith("image/png")
    cookies = await console_cookies(deployment.base, ISSUED["svc-a"].token)
    async with deployment.api(cookies=cookies) as browser:
        answer = await browser.get(f"/ui/artifacts/{artifact['artifact_id']}")
    assert answer.status_code == 200
    assert answer.headers["content-security-policy"] == "sandbox"


async def test_export_writes_only_inside_its_directory_and_sends_its_token_nowhere_else(tmp_path):
    """An API (hostile, or answering for a compromised worker) names paths and other origins."""
    stolen: list[str | None] = []

    async def elsewhere(request: web.Request) -> web.Response:
        stolen.append(request.headers.get("Authorization"))
        return web.Response(body=b"x")

    async with loopback(elsewhere) as other_port:
        job = "6b1f1a2e-8f0b-4c2e-9a31-0f8b8f6d2c11"

        def artifact(artifact_id: str, path: str) -> dict[str, Any]:
            digest = hashlib.sha256(b"x").hexdigest()
            fields = {"content_type": "text/plain", "size_bytes": 1, "sha256": digest}
            return {"artifact_id": artifact_id, "download_path": path, **fields}

        listed = [
            {"job_id": "../../escaped", "request": {"url": "u"}, "artifacts": [artifact(str(uuid4()), "/a")]},
            {
                "job_id": str(tmp_path / "absolute"),
                "request": {"url": "u"},
                "artifacts": [artifact(str(uuid4()), "/a")],
            },
            {
                "job_id": job,
                "request": {"url": "u"},
                "artifacts": [
                    artifact("../../../escaped-too", "/a"),
                    artifact(str(uuid4()), f"http://127.0.0.1:{other_port}/steal"),
                    artifact(str(uuid4()), f"//127.0.0.1:{other_port}/steal"),
                ],
            },
        ]

        async def api(request: web.Request) -> web.Response:
            return web.json_response({"items": listed, "next_cursor": None})

        async with loopback(api) as api_port:
            out = tmp_path / "deep" / "out"
            code, said = await run(
                "export", "--url", f"http://127.0.0.1:{api_port}", "--token", "the-token", "--to", str(out),
                cwd=tmp_path,
            )  # fmt: skip
    assert code == 1, said
    assert stolen == []
    written = {path.relative_to(tmp_path) for path in tmp_path.rglob("*") if path.is_file()}
    assert written == {Path("deep/out/manifest.jsonl")}, written


async def test_a_foreign_job_is_answered_as_a_missing_one_without_waiting_on_its_audit(
    deployment: Deployment, origin: Origin, monkeypatch: pytest.MonkeyPatch
):
    """A refused read is audited, but its answer does not wait on the audit record's write: it
    takes what a missing job's takes, so no time tells another caller's job from none."""
    submitted = await deployment.submit("svc-a", origin.url("/page/timing"))
    await deployment.finished(submitted["job_id"])
    worker = deployment.system.worker
    assert worker is not None
    stalled, written = asyncio.Event(), worker.publisher.send_all

    async def held(messages: Any, *batch: Any) -> Any:
        await stalled.wait()  # the broker is slow to take the audit record
        return await written(messages, *batch)

    monkeypatch.setattr(worker.publisher, "send_all", held)
    try:
        async with deployment.api("svc-b") as stranger:
            for job_id in (submitted["job_id"], str(uuid4())):
                answer = await asyncio.wait_for(stranger.get(f"/jobs/{job_id}"), 20)
                expected = {"code": "not_found", "message": f"no job {job_id}"}
                assert (answer.status_code, answer.json()) == (404, expected)
    finally:
        stalled.set()
    async with deployment.api("admin") as admin:
        for _ in range(100):
            audit = (await admin.get("/audit", params={"actor": "svc-b"})).json()["items"]
            if any(record["target"] == f"job:{submitted['job_id']}" for record in audit):
                break
            await asyncio.sleep(0.1)
    assert any(record["target"] == f"job:{submitted['job_id']}" for record in audit)  # audited all the same


async def test_a_cached_answer_names_the_job_that_stored_it_only_to_readers_of_both(
    deployment: Deployment, origin: Origin
):
    url = origin.url("/headers/Cache-Control=max-age~600/shared-by-tenants")
    first = await deployment.submit("svc-a", url)
    writer = first["job_id"]
    await deployment.finished(writer)
    second = await deployment.submit("svc-b", url)
    hit = await deployment.finished(second["job_id"], "svc-b")
    assert hit["attempts"][-1]["from_cache"] is True
    reads = [f"/jobs/{second['job_id']}{path}" for path in ("", "/events", "/explain")]
    async with deployment.api("svc-b") as reader, deployment.api("viewer") as viewer:
        for path in reads:
            answer = await answered(reader, "GET", path)
            assert answer.status_code == 200, (path, answer.text)
            assert writer not in answer.text, path
        then = {"as_of": utc_now().isoformat()}
        as_of = await answered(reader, "GET", f"/jobs/{second['job_id']}", params=then)
        assert as_of.status_code == 200
        assert writer not in as_of.text
        for listing in ({}, {"id_prefix": second["job_id"][:8]}):
            listed = await answered(reader, "GET", "/jobs", params=listing | {"limit": 500})
            assert second["job_id"] in listed.text
            assert writer not in listed.text
        assert writer in (await answered(viewer, "GET", reads[2])).text  # a reader of every job sees it


async def test_secrets_in_callback_urls_are_refused_and_never_shown(deployment: Deployment, origin: Origin):
    secret_hook = f"http://hook:hunter2@127.0.0.1:{origin.port}/hook/0/pw"
    refused = await deployment.submit("svc-a", origin.url("/page/pw"), callback_url=secret_hook)
    assert refused["submission"] == "rejected"
    assert refused["reason"] == "INVALID_CALLBACK_URL"
    assert "hunter2" not in json.dumps(refused)
    tokened = await deployment.submit(
        "svc-a", origin.url("/page/tokened"), callback_url=origin.url("/hook/0/tokened?token=s3cr3t-q")
    )
    await deployment.finished(tokened["job_id"])
    job_id = tokened["job_id"]
    async with deployment.api("operator") as operator:
        for _ in range(100):
            callbacks = (await answered(operator, "GET", f"/jobs/{job_id}/callbacks")).json()["items"]
            if callbacks and callbacks[0]["outcome"] != "in_flight":
                break
            await asyncio.sleep(0.1)
        replay = await answered(
            operator,
            "POST",
            f"/jobs/{job_id}/replay-callback",
            json={"reason": "probe", "callback_url": f"http://op:s3cr3t-pw@127.0.0.1:{origin.port}/h"},
        )
        assert replay.status_code == 400
        assert "s3cr3t-pw" not in replay.text
    async with deployment.api("viewer") as viewer, deployment.api("svc-a") as owner:
        for reader in (viewer, owner):
            for path in ("", "/events", "/callbacks", "/explain"):
                answer = await answered(reader, "GET", f"/jobs/{job_id}{path}")
                assert answer.status_code == 200
                assert "s3cr3t" not in answer.text, path
        audit = (await answered(viewer, "GET", "/audit", params={"actor": "operator"})).text
        assert "s3cr3t" not in audit


async def test_each_callers_callbacks_verify_with_its_own_key_only(deployment: Deployment, origin: Origin):
    hooks = {caller: f"/hook/0/keys-{caller}" for caller in ("svc-a", "svc-b")}
    for caller, hook in hooks.items():
        await deployment.submit(caller, origin.url(f"/page/keys-{caller}"), callback_url=origin.url(hook))
    for _ in range(300):
        if all(origin.callbacks[hook] for hook in hooks.values()):
            break
        await asyncio.sleep(0.1)
    for caller, hook in hooks.items():
        headers, body = origin.callbacks[hook][0]
        assert Webhook(callback_key(caller)).verify(body, headers)["caller_identity"] == caller
        other = "svc-b" if caller == "svc-a" else "svc-a"
        for wrong in (callback_key(other), CALLBACK_SECRET):
            with pytest.raises(WebhookVerificationError):
                Webhook(wrong).verify(body, headers)


async def test_replays_to_one_receiver_are_paced_across_calls(deployment: Deployment, origin: Origin):
    """Two replay calls at once, to one receiver spelled two ways."""
    since = utc_now()
    jobs = []
    for n in range(12):
        caller, hook = ("svc-a", "svc-b")[n % 2], origin.url(f"/hook/0/p{n}")
        jobs.append(await deployment.submit(caller, origin.url(f"/page/paced-{n}"), callback_url=hook))
    for job in jobs:
        await deployment.finished(job["job_id"])
    await asyncio.sleep(2)  # their own callbacks delivered
    receiver = "/hook/0/paced-receiver"
    body = {
        "reason": "receiver back",
        "since": since.isoformat(),
        "caller": "svc-a",
        "callback_url": origin.url(receiver),
        "per_receiver_per_s": 4,
    }
    spelled = body | {"caller": "svc-b", "callback_url": f"HTTP://127.0.0.1:{origin.port}{receiver}"}
    async with deployment.api("operator") as first, deployment.api("admin") as second:
        answers = await asyncio.gather(
            answered(first, "POST", "/callbacks/replay", json=body),
            answered(second, "POST", "/callbacks/replay", json=spelled),
        )
    assert [answer.status_code for answer in answers] == [200, 200], [a.text for a in answers]
    for _ in range(300):
        if len(origin.arrivals[receiver]) >= 12:
            break
        await asyncio.sleep(0.1)
    assert len(origin.arrivals[receiver]) >= 12  # each call replayed its caller's six
    settings = deployment.system.settings
    records = await read_topic(settings.kafka_bootstrap, settings.topic("commands"), settings.partitions)
    ours = {job["job_id"] for job in jobs}
    first_sent: dict[str, int] = {}
    for record in sorted((r for r in records if r.value), key=lambda r: r.timestamp):
        command = decode(record.value)
        if type(command).__name__ == "ReplayCallback" and str(command.job_id) in ours:
            first_sent.setdefault(str(command.job_id), record.timestamp)
    sent = sorted(first_sent.values())
    assert len(sent) == 12
    # Twelve turns a quarter second apart, both calls together: a slow machine only spreads them more
    # (had each call kept its own pace, the two would have sent them all within about 1.25 s).
    assert (sent[-1] - sent[0]) / 1000 >= 11 * 0.25 - 0.75
