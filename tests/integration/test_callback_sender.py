"""The callback sender against real loopback receivers."""

from __future__ import annotations

from collections import Counter
from uuid import uuid4

import pytest_asyncio
from aiohttp import web
from standardwebhooks import Webhook

from schemas.events import JobCompleted
from schemas.work import CallbackDue
from streams.callbacks.sender import CallbackSender
from streams.clock import utc_now
from tests.servers import loopback

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


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
        if request.path == "/flaky" and self.hits[request.path] == 1:
            return web.Response(status=503)
        return web.Response(status=204)


@pytest_asyncio.fixture
async def receiver():
    server = Receiver()
    async with loopback(server.handle) as server.port:
        yield server


def sender(allow_private: bool = True) -> CallbackSender:
    return CallbackSender(SECRET, allow_private, (), 1.0, 0.05, 5.0, utc_now)


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


async def test_a_retried_callback_keeps_its_webhook_id_and_verifies(receiver):
    client = sender()
    try:
        delivery = await client.deliver(due(receiver.url("/flaky")))
    finally:
        await client.close()
    assert (delivery.delivered, delivery.attempts, delivery.http_status) == (True, 2, 204)
    assert {headers["webhook-id"] for headers in receiver.headers} == {"msg_1"}


async def test_redirects_are_not_followed(receiver):
    client = sender()
    try:
        delivery = await client.deliver(due(receiver.url("/redirect")))
    finally:
        await client.close()
    assert not delivery.delivered
    assert delivery.last_error == "HTTP 302"
    assert receiver.hits["/target"] == 0


async def test_a_private_receiver_is_refused_at_once_without_a_connection(receiver):
    client = sender(allow_private=False)
    try:
        delivery = await client.deliver(due(receiver.url("/hook")))
    finally:
        await client.close()
    assert (delivery.delivered, delivery.attempts) == (False, 1)
    assert delivery.last_error.startswith("refused")
    assert receiver.hits["/hook"] == 0


async def test_the_body_is_the_completion_as_json_signed_over_id_timestamp_and_body(receiver):
    client = sender()
    callback = due(receiver.url("/hook"))
    try:
        await client.deliver(callback)
    finally:
        await client.close()
    headers = receiver.headers[0]
    body = callback.completion.model_dump_json().encode()
    assert Webhook(SECRET).verify(body, headers)["job_id"] == str(callback.job_id)
    assert headers["Content-Type"] == "application/json"
