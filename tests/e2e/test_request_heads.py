"""Request heads and bodies as an attacker sends them, by hand on raw sockets, with no token: heads
of 40 MiB, heads that never end, bodies at a byte now and then, bodies sent on after a 401. The API
reads none of it whole, keeps no connection past its timeouts, and stays up."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.e2e.conftest import System, running_system, worker_settings
from tests.principals import ISSUED, PRINCIPALS
from tests.raw_http import head_of

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.one_broker]
MIB = 1024 * 1024
PIECE = b"a" * 65_536
HEAD_TIMEOUT_S = 2.0


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(broker, tmp_path_factory) -> AsyncIterator[System]:
    settings = worker_settings(
        broker.bootstrap,
        tmp_path_factory.mktemp("request-heads"),
        auth_enabled=True,
        principals=PRINCIPALS,
        peer_secret="the-peer-secret-of-the-request-head-tests-0123456789",
        http_head_timeout_s=HEAD_TIMEOUT_S,
        http_body_timeout_s=6.0,
    )
    async with running_system(settings) as running:
        yield running


def port_of(system: System) -> int:
    assert system.worker is not None
    return system.worker.web_port


def resident_bytes() -> int:
    """This process's resident memory (the worker runs in it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def sent_until_answered(port: int, start: bytes, pieces: int) -> tuple[bytes, int]:
    """Sends `start`, then up to `pieces` of 64 KiB without ever ending the head: what came back (the
    refusal, or nothing when the close reset the connection first) and how many pieces went out."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = 0
    try:
        writer.write(start)
        with contextlib.suppress(ConnectionError):
            for _ in range(pieces):
                writer.write(PIECE)
                await writer.drain()
                sent += 1
                if reader.at_eof() or reader._buffer:  # answered: stop, as a client would
                    break
        try:
            async with asyncio.timeout(30):
                return await reader.read(), sent
        except ConnectionError:
            return b"", sent
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def healthy(system: System) -> bool:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_of(system)}", timeout=10) as http:
        return (await http.get("/healthz")).status_code == 200


async def test_heads_of_forty_mib_are_refused_unread_and_cost_no_memory(system):
    port = port_of(system)
    assert await healthy(system)
    before = resident_bytes()
    pieces = 40 * MIB // len(PIECE)
    in_url = [sent_until_answered(port, b"GET /", pieces) for _ in range(5)]
    in_header = [
        sent_until_answered(port, b"GET /jobs HTTP/1.1\r\nHost: x\r\nX-Pad: ", pieces) for _ in range(5)
    ]
    answers = await asyncio.gather(*in_url, *in_header)
    assert all(sent < pieces for _, sent in answers)  # refused long before the head could end
    statuses = [answer.split(b" ", 2)[1] if answer else None for answer, _ in answers]
    assert set(statuses[:5]) <= {b"414", None}
    assert set(statuses[5:]) <= {b"431", None}
    assert any(statuses)
    assert resident_bytes() - before < 16 * MIB
    assert await healthy(system)


async def test_a_head_that_never_ends_is_closed_and_many_do_not_take_the_api_down(system):
    port = port_of(system)
    opened = [await asyncio.open_connection("127.0.0.1", port) for _ in range(300)]
    for _, writer in opened[:150]:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
    answers = []
    for reader, writer in opened:
        async with asyncio.timeout(10 * HEAD_TIMEOUT_S):
            answers.append(await reader.read())
        writer.close()
    assert {answer.split(b" ", 2)[1] for answer in answers} == {b"408"}  # each told why, and closed
    assert await healthy(system)


async def test_a_body_that_trickles_is_ended_and_one_sent_on_after_a_refusal_is_not_read(system):
    port = port_of(system)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        head_of("POST", "/jobs", 100, ISSUED["svc-a"].token).replace("\n", "\r\n").encode() + b"\r\n"
    )
    answer = b""
    with contextlib.suppress(ConnectionError):
        for _ in range(100):  # a byte each second: within the head timeout each time, never done
            writer.write(b" ")
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1):
                    answer = await reader.read()
            if answer or reader.at_eof():
                break
    writer.close()
    assert answer.split(b" ", 2)[1] == b"408"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head_of("POST", "/jobs", 64 * MIB).replace("\n", "\r\n").encode() + b"\r\n")
    async with asyncio.timeout(30):
        refusal = await reader.readuntil(b"\r\n\r\n")
    assert refusal.split(b" ", 2)[1] == b"401"
    with contextlib.suppress(ConnectionError):
        for _ in range(64):
            writer.write(b"x" * MIB)
            await writer.drain()
    async with asyncio.timeout(30):
        await reader.read()  # the worker closed the connection: the rest of the body was never read
    assert reader.at_eof()
    writer.close()
    assert await healthy(system)
