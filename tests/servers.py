"""Loopback HTTP servers for tests: one handler for every path, on a free port."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from streams.web import serve

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def loopback(handler: Handler, host: str = "127.0.0.1") -> AsyncIterator[int]:
    """Serves `handler` on `host` and yields the port; always stops the server."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner, port = await serve(app, host, 0)
    try:
        yield port
    finally:
        await runner.cleanup()
