"""Loopback HTTP servers for tests: one handler for every path, on a free port."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def loopback(handler: Handler, host: str = "127.0.0.1") -> AsyncIterator[int]:
    """Serves `handler` on `host` and yields the port; always stops the server."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, 0)
        await site.start()
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


RawResponder = Callable[[bytes], Awaitable[list[bytes]]]


@contextlib.asynccontextmanager
async def raw_loopback(respond: RawResponder) -> AsyncIterator[int]:
    """A TCP server on 127.0.0.1 that answers each request with exactly the bytes `respond` returns.

    For origins that break HTTP on purpose (malformed status lines or headers), which no
    well-behaved server library would send. Each returned chunk is written and flushed on its own.
    """

    async def serve_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await reader.readuntil(b"\r\n\r\n")
            for chunk in await respond(request):
                writer.write(chunk)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve_client, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()
