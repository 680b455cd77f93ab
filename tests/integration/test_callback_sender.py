"""One callback try against real loopback receivers: bounded, signed, never redirected, typed."""

from __future__ import annotations

import asyncio
import ipaddress
from collections import Counter
from uuid import uuid4

import msgspec
import pytest
import pytest_asyncio
from aiohttp import web
from standardwebhooks import Webhook

from schemas.events import JobCompleted
from schemas.work import CallbackDue
from streams.callbacks.keys import CallbackKeys
from streams.callbacks.sender import CallbackSender
from streams.clock import utc_now
from tests.servers import loopback

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
KEYS = CallbackKeys(SECRET, {})


class Receiver:
    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.headers: list[dict[str, str]] = []
        self.port = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hits[request.path] += 1
        self.headers.append(dict(request.headers))
        if request.path == "/redirect":
            raise web.HTTPFound("/target")
        if request.path == "/down":
            return web.Response(status=503)
        if request.path == "/gone":
            return web.Response(status=410)
        if request.path == "/trickle":
            response = web.StreamResponse(status=200)
            await response.prepare(request)
            for _ in range(1_000):
                await response.write(b"x")
                await asyncio.sleep(0.05)
            return response
        if request.path == "/endless":
            response = web.StreamResponse(status=200)
            await response.prepare(request)
            while True:
                await response.write(b"y" * 65_536)
        return web.Response(status=204)


@pytest_asyncio.fixture
async def receiver():
    server = Receiver()
    async with loopback(server.handle) as server.port:
        yield server


async def one_try(url: str, allow_private: bool = True, allowed=(), timeout_s: float = 5.0):
    client = CallbackSender(KEYS, allow_private, allowed, timeout_s, utc_now)
    try:
        return await client.attempt(due(url))
    finally:
        await client.close()


def due(url: str) -> CallbackDue:
    completion = JobCompleted(
        job_id=uuid4(),
        caller_identity="svc",
        idempotency_key="k",
        job_type="http.fetch",
        url="https://example.com/",
        status="SUCCEEDED",
        attempt_count=1,
        completed_at=utc_now(),
    )
    return CallbackDue(job_id=completion.job_id, callback_url=url, webhook_id="msg_1", completion=completion)


async def test_a_2xx_answer_delivers(receiver):
    result = await one_try(receiver.url("/hook"))
    assert (result.delivered, result.http_status) == (True, 204)


async def test_a_5xx_answer_is_a_retryable_failure(receiver):
    result = await one_try(receiver.url("/down"))
    assert (result.delivered, result.http_status, result.retryable) == (False, 503, True)


async def test_410_gone_is_not_retried(receiver):
    result = await one_try(receiver.url("/gone"))
    assert (result.delivered, result.retryable) == (False, False)


async def test_redirects_are_not_followed_and_not_retried(receiver):
    result = await one_try(receiver.url("/redirect"))
    assert not result.delivered
    assert not result.retryable
    assert result.error == "HTTP 302"
    assert receiver.hits["/target"] == 0


async def test_a_private_receiver_is_refused_without_a_connection(receiver):
    result = await one_try(receiver.url("/hook"), allow_private=False)
    assert (result.delivered, result.retryable) == (False, False)
    assert result.error.startswith("refused")
    assert receiver.hits["/hook"] == 0


async def test_the_allowed_networks_setting_applies_to_callbacks(receiver):
    allowed = (ipaddress.ip_network("127.0.0.0/8"),)
    result = await one_try(receiver.url("/hook"), allow_private=False, allowed=allowed)
    assert result.delivered


async def test_a_name_that_does_not_resolve_is_a_retryable_failure():
    result = await one_try("http://no-such-receiver.invalid/hook", allow_private=False)
    assert (result.delivered, result.retryable) == (False, True)
    assert result.error.startswith("DNS_FAILED")


async def test_a_receiver_that_trickles_its_answer_is_cut_off_at_the_timeout(receiver):
    started = asyncio.get_running_loop().time()
    result = await one_try(receiver.url("/trickle"), timeout_s=1.0)
    assert asyncio.get_running_loop().time() - started < 5
    assert (result.delivered, result.retryable) == (False, True)
    assert result.error.startswith("TIMEOUT")


async def test_an_endless_answer_is_read_only_up_to_its_cap(receiver):
    result = await one_try(receiver.url("/endless"), timeout_s=30.0)
    assert (result.delivered, result.http_status) == (True, 200)


@pytest.mark.parametrize("path", ["/hook", "/down"])
async def test_the_body_is_the_completion_as_json_signed_over_id_timestamp_and_body(receiver, path):
    callback = due(receiver.url(path))
    client = CallbackSender(KEYS, True, (), 5.0, utc_now)
    try:
        await client.attempt(callback)
    finally:
        await client.close()
    headers = receiver.headers[0]
    body = msgspec.json.encode(callback.completion)
    assert Webhook(KEYS.key("svc", 1)).verify(body, headers)["job_id"] == str(callback.job_id)
    assert headers["Content-Type"] == "application/json"
    assert headers["webhook-id"] == "msg_1"
