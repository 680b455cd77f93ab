"""A receiver that was down loses nothing: its abandoned callbacks are replayed once it is back."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import pytest_asyncio
from aiohttp import web

from tests.commands import run
from tests.e2e.conftest import Origin, System, running_system, settled_ownership, worker_settings
from tests.principals import ISSUED, PRINCIPALS
from tests.servers import loopback

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.one_broker]


@dataclass
class Receiver:
    """A callback receiver that dedupes by `webhook-id`, as receivers are told to; it can be down."""

    port: int = 0
    down: bool = False
    answered: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    processed: list[str] = field(default_factory=list)

    holding: asyncio.Event = field(default_factory=asyncio.Event)  # set: `/held` answers
    held: list[str] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        webhook_id = request.headers["webhook-id"]
        await request.read()
        if request.path == "/held":
            self.held.append(webhook_id)
            await self.holding.wait()
        if self.down:
            self.answered[webhook_id].append(503)
            return web.Response(status=503)
        self.answered[webhook_id].append(204)
        if webhook_id not in self.processed:
            self.processed.append(webhook_id)
        return web.Response(status=204)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def deployment(broker, tmp_path_factory) -> AsyncIterator[tuple[System, Receiver]]:
    settings = worker_settings(
        broker.bootstrap,
        tmp_path_factory.mktemp("replay"),
        auth_enabled=True,
        principals=PRINCIPALS,
        peer_secret="the-peer-secret-of-the-replay-tests-0123456789",
        callback_max_elapsed_s=1.5,
        callback_retry_base_s=0.2,
        callback_timeout_s=120,  # a held delivery stays under way until the test lets it answer
    )
    receiver = Receiver()
    async with loopback(receiver.handle) as receiver.port, running_system(settings) as system:
        assert system.worker is not None
        await settled_ownership(system.worker, partitions=settings.partitions)
        yield system, receiver


def api(system: System, principal: str) -> httpx.AsyncClient:
    assert system.worker is not None
    headers = {"Authorization": f"Bearer {ISSUED[principal].token}"}
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}", headers=headers)


async def submitted(http: httpx.AsyncClient, url: str, hook: str) -> dict[str, Any]:
    answer = await http.post("/jobs", json={"caller_identity": "svc-a", "url": url, "callback_url": hook})
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def ended_as(outcome: str) -> Any:
    return lambda tries: bool(tries) and tries[-1]["outcome"] == outcome


async def tries_until(system: System, job_id: str, done: Any) -> list[dict[str, Any]]:
    async with api(system, "operator") as http:
        for _ in range(600):
            tries = (await http.get(f"/jobs/{job_id}/callbacks")).json()["items"]
            if done(tries):
                return tries
            await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id}'s callbacks never got there: {tries}")


async def test_callbacks_abandoned_while_the_receiver_was_down_are_replayed_once_it_is_back(
    deployment: tuple[System, Receiver], origin: Origin, tmp_path
):
    system, receiver = deployment
    hook = f"http://127.0.0.1:{receiver.port}/hooks"
    async with api(system, "svc-a") as http:
        before = await submitted(http, origin.url("/page/replay-0"), hook)
        await tries_until(system, before["job_id"], ended_as("delivered"))
        receiver.down = True
        during = [await submitted(http, origin.url(f"/page/replay-{n}"), hook) for n in (1, 2, 3)]
    for job in during:
        await tries_until(system, job["job_id"], ended_as("abandoned"))
    receiver.down = False
    everyone = [before, *during]
    webhook_ids = {
        job["job_id"]: (await tries_until(system, job["job_id"], bool))[0]["webhook_id"] for job in everyone
    }
    assert not set(receiver.processed) & {webhook_ids[job["job_id"]] for job in during}

    for refused in ("svc-a", "viewer"):
        async with api(system, refused) as http:
            answer = await http.post(
                "/callbacks/replay", json={"since": "2020-01-01T00:00:00Z", "reason": "x"}
            )
            assert answer.status_code == 403
            answer = await http.post(f"/jobs/{during[0]['job_id']}/replay-callback", json={"reason": "x"})
            assert answer.status_code in (403, 404)  # a viewer is refused; a service's own job too
    async with api(system, "operator") as http:
        planned = await http.post(
            "/callbacks/replay",
            json={"since": "2020-01-01T00:00:00Z", "caller": "svc-a", "reason": "plan", "dry_run": True},
        )
        beyond = await http.post(
            "/callbacks/replay", json={"since": "9999-12-31T23:59:59-05:00", "reason": "x", "dry_run": True}
        )
        naive = await http.post(
            "/callbacks/replay",
            json={"since": "2020-01-01T00:00:00", "caller": "svc-a", "reason": "plan", "dry_run": True},
        )
    assert planned.status_code == 200, planned.text
    assert sorted(planned.json()["replayed"]) == sorted(job["job_id"] for job in everyone)
    assert beyond.status_code == 400
    assert naive.json()["replayed"] == planned.json()["replayed"]  # a time without an offset is UTC

    base = f"http://127.0.0.1:{system.worker.web_port}"
    arguments = ("callbacks", "replay", "--caller", "svc-a", "--since", "1h", "--reason", "receiver back")
    code, output = await run(*arguments, "--url", base, "--token", ISSUED["operator"].token, cwd=tmp_path)
    assert code == 0, output
    assert "4 callbacks of 4 matching jobs: 4 replayed" in output

    for job in everyone:
        tries = await tries_until(
            system,
            job["job_id"],
            lambda tries: any(t["replay"] and t["outcome"] == "delivered" for t in tries),
        )
        assert {item["webhook_id"] for item in tries} == {webhook_ids[job["job_id"]]}
    # Each webhook-id is processed once: the missed ones now, the one delivered before deduped.
    assert sorted(receiver.processed) == sorted(webhook_ids.values())
    assert receiver.answered[webhook_ids[before["job_id"]]] == [204, 204]
    async with api(system, "operator") as http:
        audit = (await http.get("/audit", params={"target": f"job:{during[0]['job_id']}"})).json()["items"]
        explained = (await http.get(f"/jobs/{during[0]['job_id']}/explain")).json()
    replayed = [record for record in audit if record["action"] == "CALLBACK_REPLAY"]
    said = sorted((record["actor_id"], record["outcome"]) for record in replayed)
    assert said == [("operator", "ALLOWED"), ("svc-a", "DENIED"), ("viewer", "DENIED")]
    replayed = [record for record in replayed if record["outcome"] == "ALLOWED"]
    assert replayed[0]["reason"] == "receiver back"
    assert "callback.replayed" in [step["rule"] for step in explained["steps"]]
    async with api(system, "operator") as http:
        selection = {
            "since": "2020-01-01T00:00:00Z",
            "caller": "svc-a",
            "reason": "once more",
            "per_receiver_per_s": 2,
        }
        again = await http.post("/callbacks/replay", json=selection)
    assert again.status_code == 200, again.text
    assert sorted(again.json()["replayed"]) == sorted(job["job_id"] for job in everyone)
    for job in everyone:
        await tries_until(
            system,
            job["job_id"],
            lambda tries: sum(t["replay"] and t["outcome"] == "delivered" for t in tries) == 2,
        )
    assert sorted(receiver.processed) == sorted(webhook_ids.values())  # still each once


async def test_a_dry_run_says_which_replays_would_be_refused_because_a_delivery_is_under_way(
    deployment: tuple[System, Receiver], origin: Origin, tmp_path
):
    system, receiver = deployment
    async with api(system, "svc-a") as http:
        job = await submitted(http, origin.url("/page/replay-held"), f"http://127.0.0.1:{receiver.port}/held")
    await tries_until(system, job["job_id"], lambda _: bool(receiver.held))  # its delivery is under way
    base = f"http://127.0.0.1:{system.worker.web_port}" if system.worker else ""
    arguments = ("callbacks", "replay", "--caller", "svc-a", "--since", "1h", "--reason", "plan", "--dry-run")
    try:
        code, output = await run(*arguments, "--url", base, "--token", ISSUED["operator"].token, cwd=tmp_path)
        async with api(system, "operator") as http:
            planned = await http.post(
                "/callbacks/replay",
                json={"since": "2020-01-01T00:00:00Z", "caller": "svc-a", "reason": "p", "dry_run": True},
            )
    finally:
        receiver.holding.set()
    assert code == 0, output
    flat = " ".join(output.split())
    assert f"{job['job_id']} SUCCEEDED would be refused: its callback is still being delivered" in flat
    assert "1 would be refused (its callback is still being delivered)" in flat
    assert job["job_id"] in planned.json()["still_delivering"]
    assert job["job_id"] not in planned.json()["replayed"]
    await tries_until(system, job["job_id"], ended_as("delivered"))
