"""The browser renderer against real Chromium and loopback pages: every request address-guarded."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from schemas.enums import AttemptOutcome, FailureDisposition
from schemas.records import RenderOptions, Request
from streams.fetch.browser import CHROMIUM_FLAGS, BrowserRenderer, Rendered
from streams.fetch.guard import AddressPolicy
from streams.fetch.guardproxy import GuardProxy
from streams.fetch.http import FetchLimits, HttpFetcher
from tests.browser_pages import LATE_TEXT, PRIVATE_HOST, Pages, chromium_or_skip, png_size, serving_pages

pytestmark = pytest.mark.asyncio(loop_scope="module")
LOOPBACK_ONLY = (ipaddress.ip_network("127.0.0.1/32"),)
LIMITS = FetchLimits(max_body_bytes=10_000_000, max_decoded_bytes=20_000_000, max_redirects=5)


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_or_skip()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pages() -> AsyncIterator[Pages]:
    async with serving_pages() as served:
        yield served


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def renderer(chromium: str) -> AsyncIterator[BrowserRenderer]:
    browser = BrowserRenderer(AddressPolicy(False, LOOPBACK_ONLY), 2, chromium)
    try:
        yield browser
    finally:
        await browser.close()


async def render(
    renderer: BrowserRenderer,
    url: str,
    options: RenderOptions | None = None,
    screenshot: bool = False,
    limits: FetchLimits = LIMITS,
    timeout_s: float = 20.0,
) -> Rendered:
    return await renderer.render(Request(url=url), options or RenderOptions(), limits, timeout_s, screenshot)


async def test_script_written_text_is_rendered_but_not_fetched(renderer, pages):
    options = RenderOptions(wait_selector="#late", viewport_width=800, viewport_height=600)
    rendered = await render(renderer, pages.url("/late"), options, screenshot=True)
    assert rendered.result.outcome is AttemptOutcome.FETCHED, rendered.result.failure
    assert LATE_TEXT in rendered.result.body.decode()
    assert rendered.screenshot is not None
    assert png_size(rendered.screenshot) == (800, 600)
    assert rendered.browser_seconds > 0
    assert rendered.result.wire_bytes > 0
    fetcher = HttpFetcher(LIMITS, False, LOOPBACK_ONLY)
    try:
        fetched = await fetcher.fetch(Request(url=pages.url("/late")), 10.0)
    finally:
        await fetcher.close()
    assert fetched.outcome is AttemptOutcome.FETCHED
    assert LATE_TEXT not in fetched.body.decode()


async def test_a_private_subresource_is_blocked_and_recorded(renderer, pages):
    rendered = await render(renderer, pages.url("/private-image"))
    assert rendered.result.outcome is AttemptOutcome.FETCHED
    assert rendered.blocked == (pages.private("/pixel"),)
    assert pages.hits["/pixel"] == 0


async def test_the_same_subresource_loads_where_the_deployment_allows_it(chromium, pages):
    allowed = (*LOOPBACK_ONLY, ipaddress.ip_network(f"{PRIVATE_HOST}/32"))
    permissive = BrowserRenderer(AddressPolicy(False, allowed), 1, chromium)
    try:
        rendered = await render(permissive, pages.url("/private-image"))
    finally:
        await permissive.close()
    assert rendered.result.outcome is AttemptOutcome.FETCHED
    assert rendered.blocked == ()
    assert pages.hits["/pixel"] >= 1  # so the blocked test above is not passing by accident


async def test_a_redirect_to_a_private_address_is_blocked_at_its_hop(renderer, pages):
    rendered = await render(renderer, pages.url("/via-redirect"))
    assert rendered.result.outcome is AttemptOutcome.FETCHED
    assert rendered.blocked == (pages.private("/redirected"),)
    assert pages.hits["/redirected"] == 0


async def test_a_websocket_to_a_private_address_is_blocked(renderer, pages):
    options = RenderOptions(wait_until="networkidle")
    rendered = await render(renderer, pages.url("/socket"), options)
    assert rendered.result.outcome is AttemptOutcome.FETCHED
    assert rendered.blocked == (f"{PRIVATE_HOST}:{pages.private_port}",)
    assert pages.hits["/ws"] == 0


async def test_a_private_document_is_refused(renderer, pages):
    rendered = await render(renderer, pages.private("/plain"))
    assert rendered.result.outcome is AttemptOutcome.BLOCKED
    assert rendered.result.failure is not None
    assert rendered.result.failure.code == "ADDRESS_REFUSED"
    assert pages.hits["/plain"] == 0


async def test_cookies_do_not_leak_between_renders(renderer, pages):
    await render(renderer, pages.url("/cookie-set"))
    echoed = await render(renderer, pages.url("/cookie-echo"))
    assert "cookie=[]" in echoed.result.body.decode()


async def test_a_page_heavier_than_its_cap_is_refused(renderer, pages):
    small = FetchLimits(max_body_bytes=1_000_000, max_decoded_bytes=1_000_000, max_redirects=5)
    rendered = await render(renderer, pages.url("/heavy"), limits=small)
    assert rendered.result.failure is not None
    assert rendered.result.failure.code == "BODY_TOO_LARGE"


async def test_an_error_status_is_an_http_error(renderer, pages):
    rendered = await render(renderer, pages.url("/nothing-here"))
    assert rendered.result.outcome is AttemptOutcome.HTTP_ERROR
    assert rendered.result.http_status == 404


async def test_a_hung_page_is_abandoned_at_its_deadline_and_the_browser_goes_on(renderer, pages):
    hung = await render(renderer, pages.url("/hang"), timeout_s=3.0)
    assert hung.result.failure is not None
    assert hung.result.failure.code == "TIMEOUT"
    after = await render(renderer, pages.url("/plain"))
    assert after.result.outcome is AttemptOutcome.FETCHED


async def test_a_crashed_browser_fails_its_render_retryably_and_is_started_again(chromium, pages):
    renderer = BrowserRenderer(AddressPolicy(False, LOOPBACK_ONLY), 1, chromium)
    try:
        assert (await render(renderer, pages.url("/plain"))).result.outcome is AttemptOutcome.FETCHED
        pages.release.clear()
        rendering = asyncio.ensure_future(render(renderer, pages.url("/slow")))
        await asyncio.wait_for(pages.slow_started.wait(), 20)
        for pid in browser_processes():
            with contextlib.suppress(ProcessLookupError):  # a helper may exit on its own meanwhile
                os.kill(pid, signal.SIGKILL)
        crashed = await rendering
        pages.release.set()
        assert crashed.result.failure is not None
        assert crashed.result.failure.code == "BROWSER_CRASHED"
        again = await render(renderer, pages.url("/plain"))
        assert again.result.outcome is AttemptOutcome.FETCHED
        assert renderer.launches == 2
    finally:
        pages.release.set()
        await renderer.close()


def browser_processes() -> list[int]:
    """Chromium processes started below this test process."""
    mine = os.getpid()
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
        names[int(entry.name)] = name
    found = []
    for pid, name in names.items():
        ancestor = parents.get(pid)
        while ancestor and ancestor != mine:
            ancestor = parents.get(ancestor)
        if ancestor == mine and "chrom" in name:
            found.append(pid)
    return found


async def test_a_remote_browser_over_cdp_renders_through_the_same_guard(chromium, pages, tmp_path):
    remote = await asyncio.create_subprocess_exec(
        chromium,
        "--headless",
        *CHROMIUM_FLAGS,
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        f"--user-data-dir={tmp_path / 'profile'}",
        "about:blank",
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert remote.stderr is not None
        async with asyncio.timeout(30):
            while b"DevTools listening on ws://" not in (line := await remote.stderr.readline()):
                assert line, "chromium ended before it listened"
        endpoint = "http://" + line.decode().split("ws://", 1)[1].split("/", 1)[0]
        renderer = BrowserRenderer(AddressPolicy(False, LOOPBACK_ONLY), 1, cdp_url=endpoint)
        try:
            late = await render(renderer, pages.url("/late"), RenderOptions(wait_selector="#late"))
            guarded = await render(renderer, pages.url("/private-image"))
        finally:
            await renderer.close()
    finally:
        remote.kill()
        await remote.wait()
    assert LATE_TEXT in late.result.body.decode()
    assert guarded.blocked == (pages.private("/pixel"),)


async def test_a_selector_chromium_cannot_parse_fails_the_render_for_good(renderer, pages):
    rendered = await render(renderer, pages.url("/plain"), RenderOptions(wait_selector="p[[[!"))
    assert rendered.result.failure is not None
    assert rendered.result.failure.code == "INVALID_SELECTOR"
    assert rendered.result.failure.disposition is FailureDisposition.TERMINAL


@pytest.mark.parametrize(
    "request_line",
    [b"CONNECT 127.0.0.1:99999 HTTP/1.1", b"CONNECT nohost HTTP/1.1", b"GET ftp://x/ HTTP/1.1", b"NONSENSE"],
)
async def test_the_guard_proxy_drops_a_request_it_cannot_read_and_keeps_serving(request_line, pages, caplog):
    guard = GuardProxy(AddressPolicy(False, LOOPBACK_ONLY), 1_000_000)
    host, port = (await guard.start()).removeprefix("http://").split(":")
    try:
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(request_line + b"\r\n\r\n")
        assert await reader.read() == b""  # closed without an answer
        writer.close()
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(f"GET {pages.url('/plain')} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert (await reader.read()).startswith(b"HTTP/1.1 200")
        writer.close()
    finally:
        await guard.close()
    gc.collect()  # an exception left in a connection's task is reported when the task is collected
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
