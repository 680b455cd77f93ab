"""The bounded, guarded fetcher against real loopback origins."""

from __future__ import annotations

import asyncio
import gzip
import ipaddress
from collections import Counter

import pytest
import pytest_asyncio
from aiohttp import web

from schemas.enums import AttemptOutcome, FailureDisposition
from schemas.records import Request
from streams.fetch.http import FetchLimits, HttpFetcher
from tests.servers import loopback

LIMITS = FetchLimits(max_body_bytes=100_000, max_decoded_bytes=200_000, max_redirects=3)


class Origins:
    """The same app on 127.0.0.1 and 127.0.0.2, counting requests per host."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.ports: dict[str, int] = {}

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.ports[host]}{path}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        host = request.host.split(":")[0]
        self.hits[host] += 1
        name = request.path.strip("/")
        if name == "page":
            return web.Response(text="ok")
        if name == "bomb":
            return web.Response(body=gzip.compress(b"\0" * 5_000_000), headers={"Content-Encoding": "gzip"})
        if name == "huge":
            return web.Response(body=b"x" * 500_000)
        if name == "stream":
            response = web.StreamResponse()
            await response.prepare(request)
            for _ in range(200):
                await response.write(b"y" * 1_000)
            return response
        if name == "loop":
            raise web.HTTPFound(request.path)
        if name == "to-other":
            target = request.query["target"]
            raise web.HTTPFound(target)
        if name == "to-file":
            raise web.HTTPFound("file:///etc/passwd")
        if name == "stall":
            await asyncio.sleep(2)
        return web.Response(status=404)


@pytest_asyncio.fixture
async def origins():
    servers = Origins()
    async with loopback(servers.handle) as first, loopback(servers.handle, "127.0.0.2") as second:
        servers.ports = {"127.0.0.1": first, "127.0.0.2": second}
        yield servers


@pytest_asyncio.fixture
async def fetcher():
    client = HttpFetcher(LIMITS, allow_private=True)
    try:
        yield client
    finally:
        await client.close()


async def test_a_page_is_fetched(fetcher, origins):
    result = await fetcher.fetch(Request(url=origins.url("127.0.0.1", "/page")), 5)
    assert result.outcome is AttemptOutcome.FETCHED
    assert result.body == b"ok"
    assert result.http_status == 200


async def test_a_gzip_bomb_stops_at_the_decoded_cap(fetcher, origins):
    result = await fetcher.fetch(Request(url=origins.url("127.0.0.1", "/bomb")), 5)
    assert result.failure.code == "BODY_TOO_LARGE"
    assert "decoded" in result.failure.safe_message


@pytest.mark.parametrize("path", ["/huge", "/stream"])
async def test_a_body_over_the_wire_cap_is_refused(fetcher, origins, path):
    result = await fetcher.fetch(Request(url=origins.url("127.0.0.1", path)), 5)
    assert result.outcome is AttemptOutcome.TOO_LARGE
    assert result.failure.disposition is FailureDisposition.TERMINAL


async def test_redirects_are_bounded(fetcher, origins):
    result = await fetcher.fetch(Request(url=origins.url("127.0.0.1", "/loop")), 5)
    assert result.failure.code == "TOO_MANY_REDIRECTS"
    assert origins.hits["127.0.0.1"] == LIMITS.max_redirects + 1


async def test_a_redirect_to_another_scheme_is_refused(fetcher, origins):
    result = await fetcher.fetch(Request(url=origins.url("127.0.0.1", "/to-file")), 5)
    assert result.failure.code == "INVALID_REDIRECT"


async def test_the_whole_fetch_has_one_wall_clock_deadline(fetcher, origins):
    result = await fetcher.fetch(Request(url=origins.url("127.0.0.1", "/stall")), 0.5)
    assert result.outcome is AttemptOutcome.TIMEOUT
    assert result.failure.disposition is FailureDisposition.RETRYABLE


async def test_a_loopback_target_is_refused_without_a_connection(origins):
    guarded = HttpFetcher(LIMITS, allow_private=False)
    try:
        result = await guarded.fetch(Request(url=origins.url("127.0.0.1", "/page")), 5)
    finally:
        await guarded.close()
    assert result.failure.code == "ADDRESS_REFUSED"
    assert origins.hits["127.0.0.1"] == 0


async def test_every_redirect_hop_is_checked_again(origins):
    only_second_loopback = (ipaddress.ip_network("127.0.0.2/32"),)
    guarded = HttpFetcher(LIMITS, allow_private=False, allowed_networks=only_second_loopback)
    target = origins.url("127.0.0.1", "/page")
    try:
        allowed = await guarded.fetch(Request(url=origins.url("127.0.0.2", "/page")), 5)
        redirected = await guarded.fetch(
            Request(url=origins.url("127.0.0.2", f"/to-other?target={target}")), 5
        )
    finally:
        await guarded.close()
    assert allowed.outcome is AttemptOutcome.FETCHED
    assert redirected.failure.code == "ADDRESS_REFUSED"
    assert origins.hits["127.0.0.1"] == 0


async def test_a_closed_port_is_a_retryable_connection_failure(fetcher):
    from streams.broker.embedded import free_loopback_port

    result = await fetcher.fetch(Request(url=f"http://127.0.0.1:{free_loopback_port()}/"), 5)
    assert result.failure.code == "CONNECTION_FAILED"
    assert result.failure.disposition is FailureDisposition.RETRYABLE
