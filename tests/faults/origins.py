"""A loopback origin for fault scenarios: `/<behaviour>/<job key>`, counting requests per job key.

Behaviours: `page` (fast), `sleep` (400 ms), `drip` (one byte every 100 ms, forever), `huge`
(declares 50 MB), `bomb` (a gzip bomb in one chunk), `loop` (redirects to itself; hops count
apart from the job's requests), `private` (redirects to 127.0.0.2), `malformed` (a header line
without a colon), `hook-down` / `hook-late` (callback receivers that fail always / twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from aiohttp import web

from tests.servers import loopback, raw_loopback

BOMB = gzip.compress(b"\0" * 20_000_000)


@dataclass
class HostileOrigin:
    port: int = 0
    malformed_port: int = 0
    requests: Counter[str] = field(default_factory=Counter)
    hops: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0

    def url(self, behaviour: str, key: str) -> str:
        if behaviour == "malformed":
            return f"http://127.0.0.1:{self.malformed_port}/malformed/{key}"
        return f"http://127.0.0.1:{self.port}/{behaviour}/{key}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        _, behaviour, key, *rest = [*request.path.split("/"), ""]
        if rest and rest[0]:
            self.hops[key] += 1
        else:
            self.requests[key] += 1
        self.in_flight += 1
        try:
            return await getattr(self, f"_{behaviour.replace('-', '_')}")(request, key)
        finally:
            self.in_flight -= 1

    async def _page(self, request: web.Request, key: str) -> web.StreamResponse:
        return web.Response(text=f"page {key}", content_type="text/html")

    async def _sleep(self, request: web.Request, key: str) -> web.StreamResponse:
        await asyncio.sleep(0.4)
        return web.Response(text=f"slept {key}", content_type="text/html")

    async def _drip(self, request: web.Request, key: str) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            while True:
                await response.write(b".")
                await asyncio.sleep(0.1)
        return response

    async def _huge(self, request: web.Request, key: str) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": str(50_000_000)})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            await response.write(b"x" * 65_536)
        return response

    async def _bomb(self, request: web.Request, key: str) -> web.StreamResponse:
        return web.Response(body=BOMB, headers={"Content-Encoding": "gzip"})

    async def _loop(self, request: web.Request, key: str) -> web.StreamResponse:
        raise web.HTTPFound(f"/loop/{key}/{self.hops[key] + 1}")

    async def _private(self, request: web.Request, key: str) -> web.StreamResponse:
        raise web.HTTPFound(f"http://127.0.0.2:{self.port}/page/{key}")

    async def _hook_down(self, request: web.Request, key: str) -> web.StreamResponse:
        return web.Response(status=503)

    async def _hook_late(self, request: web.Request, key: str) -> web.StreamResponse:
        return web.Response(status=503 if self.requests[key] <= 2 else 204)


@contextlib.asynccontextmanager
async def hostile_origin() -> AsyncIterator[HostileOrigin]:
    origin = HostileOrigin()

    async def malformed(request: bytes) -> list[bytes]:
        key = request.split(b" ")[1].rsplit(b"/", 1)[-1].decode()
        origin.requests[key] += 1
        return [b"HTTP/1.1 200 OK\r\nthis line has no colon\r\nContent-Length: 2\r\n\r\nok"]

    async with loopback(origin.handle) as origin.port, raw_loopback(malformed) as origin.malformed_port:
        yield origin
