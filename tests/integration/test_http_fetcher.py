"""The bounded, guarded fetcher against real loopback origins."""

from __future__ import annotations

import asyncio
import gzip
import ipaddress
import socket
import struct
from collections import Counter
from datetime import timedelta

import pytest
import pytest_asyncio
from aiohttp import web

from schemas.enums import AttemptOutcome, FailureDisposition
from schemas.records import Request
from streams.fetch.http import FetchLimits, HttpFetcher
from tests.servers import loopback, raw_loopback

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


def gzip_bomb_in_one_chunk(decoded_size: int) -> bytes:
    return gzip.compress(b"\0" * decoded_size)


HOSTILE: dict[str, tuple[list[bytes], str]] = {
    # name: (raw response chunks, expected failure code)
    "redirect_to_a_bad_port": (
        [b"HTTP/1.1 302 Found\r\nLocation: http://host:abc/\r\nContent-Length: 0\r\n\r\n"],
        "INVALID_REDIRECT",
    ),
    "redirect_to_an_invalid_idna_host": (
        ["HTTP/1.1 302 Found\r\nLocation: http://\u2603.example/\r\nContent-Length: 0\r\n\r\n".encode()],
        "INVALID_REDIRECT",
    ),
    "redirect_with_a_62_char_label": (
        [b"HTTP/1.1 302 Found\r\nLocation: http://" + b"a" * 64 + b".example/\r\nContent-Length: 0\r\n\r\n"],
        "INVALID_REDIRECT",
    ),
    "redirect_with_control_characters": (
        [b"HTTP/1.1 302 Found\r\nLocation: http://a.example/\x01x\r\nContent-Length: 0\r\n\r\n"],
        "INVALID_REDIRECT",
    ),
    "malformed_status_line": ([b"HTTP/1.1 two hundred OK\r\n\r\n"], "PROTOCOL_ERROR"),
    "malformed_header": (
        [b"HTTP/1.1 200 OK\r\nno colon here\r\nContent-Length: 2\r\n\r\nok"],
        "PROTOCOL_ERROR",
    ),
    "header_block_too_large": (
        [b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n"],
        "PROTOCOL_ERROR",
    ),
    "bad_content_length": ([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"], "PROTOCOL_ERROR"),
    "unknown_content_encoding": (
        [b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 4\r\n\r\nabcd"],
        "UNSUPPORTED_CONTENT_ENCODING",
    ),
    "corrupt_gzip": (
        [b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nabcd"],
        "DECODING_FAILED",
    ),
    "closed_without_answer": ([], "PROTOCOL_ERROR"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
async def test_whatever_a_hostile_origin_sends_becomes_one_typed_failure(fetcher, name):
    chunks, code = HOSTILE[name]

    async def respond(request: bytes) -> list[bytes]:
        return chunks

    async with raw_loopback(respond) as port:
        result = await fetcher.fetch(Request(url=f"http://127.0.0.1:{port}/"), 5)
    assert result.failure is not None
    assert result.failure.code == code
    assert result.outcome is not AttemptOutcome.FETCHED


async def test_a_gzip_bomb_inside_one_chunk_is_cut_at_the_decoded_cap(fetcher):
    body = gzip_bomb_in_one_chunk(50_000_000)
    head = f"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {len(body)}\r\n\r\n".encode()

    async def respond(request: bytes) -> list[bytes]:
        return [head + body]

    async with raw_loopback(respond) as port:
        result = await fetcher.fetch(Request(url=f"http://127.0.0.1:{port}/"), 5)
    assert result.failure.code == "BODY_TOO_LARGE"
    assert len(body) < LIMITS.max_body_bytes  # the wire cap alone would not have stopped it


@pytest.mark.parametrize(
    ("retry_after", "expected_s"),
    [("1000000000000", 60.0), ("\u0661\u0662", None), ("\uff15", None), ("30", 30.0), ("-1", None)],
)
async def test_retry_after_is_parsed_strictly_and_clamped_to_the_deadline(fetcher, retry_after, expected_s):
    from streams.clock import utc_now

    async def respond(request: bytes) -> list[bytes]:
        header = f"Retry-After: {retry_after}\r\n".encode()
        return [b"HTTP/1.1 503 Service Unavailable\r\n" + header + b"Content-Length: 0\r\n\r\n"]

    now = utc_now()
    deadline = now + timedelta(seconds=60)
    async with raw_loopback(respond) as port:
        result = await fetcher.fetch(Request(url=f"http://127.0.0.1:{port}/"), 5, retry_until=deadline)
    assert result.failure.code == "HTTP_503"
    if expected_s is None:
        assert result.failure.retry_at is None
    else:
        assert abs((result.failure.retry_at - now).total_seconds() - expected_s) < 5
        assert result.failure.retry_at <= deadline


async def test_a_redirect_chain_keeps_the_fetch_within_one_deadline(fetcher):
    async def respond(request: bytes) -> list[bytes]:
        await asyncio.sleep(0.2)
        return [b"HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n"]

    async with raw_loopback(respond) as port:
        result = await fetcher.fetch(Request(url=f"http://127.0.0.1:{port}/"), 0.5)
    assert result.failure.code in ("TIMEOUT", "TOO_MANY_REDIRECTS")


async def test_a_cookie_one_job_receives_is_never_sent_for_another(fetcher):
    seen: list[bytes] = []

    async def respond(request: bytes) -> list[bytes]:
        seen.append(request)
        return [b"HTTP/1.1 200 OK\r\nSet-Cookie: session=secret; Path=/\r\nContent-Length: 2\r\n\r\nok"]

    async with raw_loopback(respond) as port:
        await fetcher.fetch(Request(url=f"http://127.0.0.1:{port}/first"), 5)
        await fetcher.fetch(Request(url=f"http://127.0.0.1:{port}/second"), 5)
    assert len(seen) == 2
    assert b"secret" not in seen[1].lower()


async def test_a_connection_the_origin_resets_is_its_own_retryable_failure(fetcher):
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.get_extra_info("socket").setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
        )
        writer.transport.abort()  # with no linger: a reset, not a close

    server = await asyncio.start_server(reset, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        result = await fetcher.fetch(Request(url=f"http://127.0.0.1:{port}/"), 5)
    finally:
        server.close()
        await server.wait_closed()
    assert result.failure is not None
    assert (result.failure.code, result.failure.disposition.value) == ("CONNECTION_RESET", "RETRYABLE")
    assert result.requests == 1
