"""What another worker answers is checked: a broken or unreachable peer is a 503, never a crash."""

from __future__ import annotations

import pytest
from aiohttp import web
from starlette.requests import Request

from streams.broker.embedded import free_loopback_port
from streams.web.errors import ApiError
from streams.web.models import ShardPage
from streams.web.peers import Peers
from tests.servers import loopback

pytestmark = pytest.mark.asyncio


def incoming() -> Request:
    return Request({"type": "http", "method": "GET", "path": "/jobs", "headers": [], "query_string": b""})


@pytest.mark.parametrize(
    "answer",
    [
        web.json_response({"oops": 1}),
        web.json_response({"partitions": ["x"], "items": [], "resume_after": None}),
        web.Response(text="not json"),
        web.Response(status=500, text="boom"),
    ],
)
async def test_an_unusable_shard_answer_is_a_503(answer):
    async def handler(_: web.Request) -> web.StreamResponse:
        return answer

    peers = Peers(timeout_s=2)
    try:
        async with loopback(handler) as port:
            with pytest.raises(ApiError) as refused:
                await peers.shard(f"http://127.0.0.1:{port}", "/_shard/jobs", {}, incoming(), ShardPage)
    finally:
        await peers.close()
    assert refused.value.status == 503


async def test_a_peer_that_does_not_listen_is_a_503_to_retry():
    peers = Peers(timeout_s=2)
    try:
        with pytest.raises(ApiError) as refused:
            await peers.shard(
                f"http://127.0.0.1:{free_loopback_port()}", "/_shard/jobs", {}, incoming(), ShardPage
            )
    finally:
        await peers.close()
    assert refused.value.status == 503
    assert refused.value.headers == {"Retry-After": "1"}


async def test_a_usable_shard_answer_is_returned_typed():
    async def handler(_: web.Request) -> web.StreamResponse:
        return web.json_response({"partitions": [0, 2], "items": [["p", {"a": 1}]], "resume_after": None})

    peers = Peers(timeout_s=2)
    try:
        async with loopback(handler) as port:
            shard = await peers.shard(f"http://127.0.0.1:{port}", "/_shard/jobs", {}, incoming(), ShardPage)
    finally:
        await peers.close()
    assert shard.partitions == [0, 2]
    assert shard.items == [("p", {"a": 1})]
