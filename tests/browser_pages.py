"""Loopback pages for browser tests, and the Chromium they need (skipped only outside CI)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import struct
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from tests.servers import loopback

LATE_TEXT = "written by script after a delay"
PRIVATE_HOST = "127.0.0.2"  # loopback, outside the tests' allowed 127.0.0.1/32


def chromium_or_skip() -> str:
    """The Chromium to drive; a machine without one skips, except in CI, where it is required."""
    found = shutil.which(os.environ.get("SCRAPESTREAM_BROWSER_EXECUTABLE", "chromium"))
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser tests: install Debian's chromium (.ci/run does)")
        pytest.skip("no chromium on this machine")
    return found


def png_size(image: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk; fails on anything that is not a PNG."""
    assert image[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert image[12:16] == b"IHDR"
    width, height = struct.unpack(">II", image[16:24])
    return width, height


@dataclass
class Pages:
    """A loopback site whose pages exercise rendering; it counts every request by path."""

    port: int = 0
    private_port: int = 0  # the same pages, served on PRIVATE_HOST
    hits: Counter[str] = field(default_factory=Counter)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    slow_started: asyncio.Event = field(default_factory=asyncio.Event)
    poster_colour: str = "#1565c0"  # the poster's banner, as the test repaints it

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def private(self, path: str) -> str:
        return f"http://{PRIVATE_HOST}:{self.private_port}{path}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """`/<name>`: the page named by the path (dashes as underscores); 404 for any other."""
        self.hits[request.path] += 1
        page = getattr(self, "_" + request.path.strip("/").replace("-", "_"), None)
        if page is None:
            return web.Response(status=404, text="missing")
        response: web.StreamResponse = await page(request)
        return response

    async def _late(self, request: web.Request) -> web.Response:
        words = ", ".join(f"'{word}'" for word in LATE_TEXT.split())  # the text is not in the source
        script = (
            f"setTimeout(() => {{ const late = document.createElement('p'); late.id = 'late';"
            f" late.textContent = [{words}].join(' '); document.body.append(late); }}, 300);"
        )
        return _html(f"<p>waiting</p><script>{script}</script>")

    async def _private_image(self, request: web.Request) -> web.Response:
        return _html(f'<p>page</p><img src="{self.private("/pixel")}">')

    async def _via_redirect(self, request: web.Request) -> web.Response:
        return _html('<p>page</p><img src="/redirect-out">')

    async def _redirect_out(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(self.private("/redirected"))

    async def _redirect_out_tls(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(f"https://{PRIVATE_HOST}:{self.private_port}/redirected")

    async def _socket(self, request: web.Request) -> web.Response:
        target = f"ws://{PRIVATE_HOST}:{self.private_port}/ws"
        return _html(f"<p>page</p><script>new WebSocket('{target}');</script>")

    async def _hang(self, request: web.Request) -> web.Response:
        return _html("<script>while (true) {}</script>")

    async def _cookie_set(self, request: web.Request) -> web.Response:
        response = _html("<p>set</p>")
        response.set_cookie("session", "secret-of-the-first-job")
        return response

    async def _cookie_echo(self, request: web.Request) -> web.Response:
        return _html(f"<p id='cookie'>cookie=[{request.headers.get('Cookie', '')}]</p>")

    async def _heavy(self, request: web.Request) -> web.Response:
        return _html('<p>heavy</p><script src="/blob"></script>')

    async def _blob(self, request: web.Request) -> web.Response:
        # a script is read whole before it runs, where an image that fails to decode is abandoned
        return web.Response(body=b"//" + b"x" * 3_000_000, content_type="text/javascript")

    async def _slow(self, request: web.Request) -> web.Response:
        self.slow_started.set()
        await self.release.wait()
        return _html("<p>slow</p>")

    async def _big_dom(self, request: web.Request) -> web.Response:
        """A few bytes of script that build a DOM of some 24 MiB."""
        script = "const p = document.createElement('p'); p.textContent = 'x'.repeat(24 * 1024 * 1024);"
        return _html(f"<script>{script} document.body.append(p);</script>")

    async def _poster(self, request: web.Request) -> web.Response:
        """A banner in `poster_colour` over a visitor count that changes on every request."""
        banner = f'<div style="margin:40px;width:400px;height:200px;background:{self.poster_colour}"></div>'
        count = f'<p style="font:12px sans-serif;margin:40px">Visitors today: {self.hits[request.path]}</p>'
        return _html(f'<div style="background:white">{banner}{count}</div>')

    async def _plain(self, request: web.Request) -> web.Response:
        return _html("<p>plain page</p>")

    async def _pixel(self, request: web.Request) -> web.Response:
        return web.Response(body=b"GIF89a", content_type="image/gif")


@contextlib.asynccontextmanager
async def serving_pages() -> AsyncIterator[Pages]:
    """The pages on 127.0.0.1 and on PRIVATE_HOST; always stopped."""
    pages = Pages()
    async with (
        loopback(pages.handle) as pages.port,
        loopback(pages.handle, PRIVATE_HOST) as pages.private_port,
    ):
        try:
            yield pages
        finally:
            pages.release.set()


def _html(body: str) -> web.Response:
    return web.Response(text=f"<!doctype html><html><body>{body}</body></html>", content_type="text/html")
