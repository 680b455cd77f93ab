"""Renders pages in one headless Chromium, a fresh context per job, every request address-guarded.

The browser is local (`SCRAPESTREAM_BROWSER_EXECUTABLE`) or remote over CDP
(`SCRAPESTREAM_BROWSER_CDP_URL`), started at the first render and started again when it has gone
away (a crash fails the renders it carried, as retryable `BROWSER_CRASHED`). Each render gets its
own context (no cookies, storage or cache shared between jobs) whose traffic all goes through its
own `GuardProxy`. At most `SCRAPESTREAM_BROWSER_CONCURRENCY` pages render at once. The whole
render runs under one deadline; a page that hangs is abandoned with its context. Whatever the page
or the browser does ends in a `Rendered` with a typed failure: nothing raises out of `render`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import shutil
import subprocess
import time
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, cast
from urllib.parse import urlsplit

from playwright.async_api import Browser, BrowserContext, Page, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Request as PlaywrightRequest

from projections.lifecycle.outcomes import status_failure
from schemas.enums import AttemptOutcome
from schemas.records import RenderOptions, Request
from schemas.types import to_cost_scale
from streams.clock import utc_now
from streams.fetch.guard import AddressPolicy
from streams.fetch.guardproxy import REFUSAL_HEADER, GuardProxy
from streams.fetch.http import FetchLimits, FetchResult, local_result
from streams.settings import Settings

log = logging.getLogger(__name__)
CHROMIUM_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",  # no UDP around the guard proxy
)
CLOSE_TIMEOUT_S = 10.0
VERSION_TIMEOUT_S = 10.0
GUARD_CLOSE_TIMEOUT_S = 2.0
HTML_TYPE = "text/html; charset=utf-8"
# The rendered document's size in UTF-8 bytes, measured in the page: nothing is copied out to learn it.
DOCUMENT_BYTES = """() => {
  const root = document.documentElement;
  const doctype = document.doctype ? new XMLSerializer().serializeToString(document.doctype) : "";
  return new TextEncoder().encode(doctype + (root ? root.outerHTML : "")).length;
}"""
NET_ERRORS = {
    "ERR_NAME_NOT_RESOLVED": "DNS_FAILED",
    "ERR_CONNECTION_REFUSED": "CONNECTION_FAILED",
    "ERR_CONNECTION_RESET": "CONNECTION_FAILED",
    "ERR_CONNECTION_CLOSED": "PROTOCOL_ERROR",
    "ERR_EMPTY_RESPONSE": "PROTOCOL_ERROR",
    "ERR_TOO_MANY_REDIRECTS": "TOO_MANY_REDIRECTS",
    "ERR_CERT_": "TLS_FAILED",
    "ERR_SSL_": "TLS_FAILED",
}


@dataclass(frozen=True)
class Rendered:
    result: FetchResult  # the rendered HTML as the body, or the failure
    screenshot: bytes | None = None
    browser_seconds: Decimal = Decimal("0.000000")
    blocked: tuple[str, ...] = ()


def most_held_s(timeout_s: float) -> float:
    """The longest one render may hold the browser: its deadline, then closing its context and proxy.
    A reservation on a browser route is for this long, and no render is charged for longer."""
    return timeout_s + CLOSE_TIMEOUT_S + GUARD_CLOSE_TIMEOUT_S


def executable_of(configured: str) -> str | None:
    """The Chromium to launch: a path, or a name looked up on PATH; None when there is none."""
    return shutil.which(configured)


def browser_available(settings: Settings) -> bool:
    return browser_problem(settings) is None


def browser_problem(settings: Settings) -> str | None:
    """Why this worker has no browser to render with (what to install or set), or None."""
    if settings.browser_cdp_url is not None:
        return None
    install = "install Chromium (Debian: apt install chromium) or set SCRAPESTREAM_BROWSER_EXECUTABLE"
    executable = executable_of(settings.browser_executable)
    if executable is None:
        return f"no browser: {settings.browser_executable!r} is not an executable here; {install}"
    if not _names_chromium(executable):
        return f"no browser: {executable} --version does not name Chromium or Chrome; {install}"
    return None


async def probe_browser(settings: Settings) -> str | None:
    """`browser_problem`, asked off the event loop: the executable's `--version` may take seconds."""
    return await asyncio.to_thread(browser_problem, settings)


@functools.cache
def _names_chromium(executable: str) -> bool:
    try:
        said = subprocess.run(  # noqa: S603 (the operator's own setting, run with no shell)
            [executable, "--version"], capture_output=True, timeout=VERSION_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return b"chrom" in said.stdout.lower()


def renderer_of(settings: Settings) -> BrowserRenderer | None:
    """The deployment's renderer; None when it has no browser (`browser.render` is then not run)."""
    if not browser_available(settings):
        return None
    policy = AddressPolicy(settings.allow_private_networks, settings.allowed_networks)
    return BrowserRenderer(
        policy,
        settings.browser_concurrency,
        executable_of(settings.browser_executable),
        settings.browser_cdp_url,
        settings.browser_proxy_host,
    )


class BrowserRenderer:
    def __init__(
        self,
        policy: AddressPolicy,
        concurrency: int,
        executable: str | None = None,
        cdp_url: str | None = None,
        proxy_host: str = "127.0.0.1",
    ) -> None:
        self._policy = policy
        self._executable = executable
        self._cdp_url = cdp_url
        self._proxy_host = proxy_host
        self._places = asyncio.Semaphore(max(concurrency, 1))
        self._starting = asyncio.Lock()
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self.launches = 0

    async def render(
        self,
        request: Request,
        options: RenderOptions,
        limits: FetchLimits,
        timeout_s: float,
        screenshot: bool,
    ) -> Rendered:
        async with self._places:
            started = time.monotonic()
            guard = GuardProxy(self._policy, limits.max_decoded_bytes, self._proxy_host)
            context: BrowserContext | None = None
            navigated = [request.url]  # the document and each hop of its redirects
            sent: list[PlaywrightRequest] = []  # every request the page made
            try:
                async with asyncio.timeout(timeout_s):
                    browser = await self._connected()
                    context = await browser.new_context(
                        proxy={"server": await guard.start()},
                        viewport={"width": options.viewport_width, "height": options.viewport_height},
                        service_workers="block",
                        accept_downloads=False,
                        extra_http_headers=dict(request.headers),
                    )
                    page = await context.new_page()
                    page.on("request", lambda made: _follow_document(made, page, navigated, sent))
                    rendered = await self._capture(page, request, options, limits, screenshot)
            except Exception as exc:  # whatever the page or the browser did, typed once, here
                rendered = Rendered(local_result(*self._classify(exc, guard, navigated)))
            finally:
                await self._dispose(context, guard)
            held_s = min(time.monotonic() - started, most_held_s(timeout_s))
            seconds = to_cost_scale(Decimal(held_s))
            elapsed_ms = int((time.monotonic() - started) * 1000)
            if guard.exceeded:
                rendered = Rendered(
                    local_result(
                        "BODY_TOO_LARGE", f"the page loaded more than {limits.max_decoded_bytes} bytes"
                    )
                )
            result = replace(
                rendered.result, wire_bytes=guard.received_bytes, elapsed_ms=elapsed_ms, requests=len(sent)
            )
            return replace(rendered, result=result, browser_seconds=seconds, blocked=tuple(guard.blocked))

    async def _capture(
        self, page: Page, request: Request, options: RenderOptions, limits: FetchLimits, screenshot: bool
    ) -> Rendered:
        response = await page.goto(request.url, wait_until=cast(Any, options.wait_until), timeout=0)
        status = 200 if response is None else response.status
        refused = None if response is None else (await response.all_headers()).get(REFUSAL_HEADER)
        if refused is not None:
            return Rendered(local_result(refused, f"{request.url}: the document's address is refused"))
        failure = status_failure(
            status, None if response is None else response.headers.get("retry-after"), utc_now()
        )
        if failure is not None:
            return Rendered(
                FetchResult(
                    outcome=AttemptOutcome.HTTP_ERROR, failure=failure, http_status=status, final_url=page.url
                )
            )
        if options.wait_selector is not None:
            try:
                await page.wait_for_selector(f"css={options.wait_selector}", state="attached", timeout=0)
            except PlaywrightError as exc:
                message = str(exc).split("\n", 1)[0]
                if "while parsing" not in message and "not a valid" not in message:
                    raise
                return Rendered(local_result("INVALID_SELECTOR", message))
        cap = limits.max_decoded_bytes
        measured = int(await page.evaluate(DOCUMENT_BYTES))
        if measured > cap:  # refused before a byte of it is copied out of the page
            detail = f"the rendered page measures {measured} bytes, more than {cap}"
            return Rendered(local_result("BODY_TOO_LARGE", detail))
        html = (await page.content()).encode()
        if len(html) > cap:  # grown since it was measured
            return Rendered(local_result("BODY_TOO_LARGE", f"the rendered page exceeds {cap} bytes"))
        image = (
            await page.screenshot(type="png", full_page=options.full_page, timeout=0) if screenshot else None
        )
        fetched = FetchResult(
            outcome=AttemptOutcome.FETCHED,
            failure=None,
            http_status=status,
            final_url=page.url,
            body=html,
            content_type=HTML_TYPE,
            storable=False,  # a rendered page is not the origin's response: never a cache entry
        )
        return Rendered(fetched, image)

    async def _connected(self) -> Browser:
        async with self._starting:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            if self._browser is not None:
                log.warning("the browser went away; starting it again")
            if self._playwright is None:
                self._playwright = await async_playwright().start()
            chromium = self._playwright.chromium
            if self._cdp_url is not None:
                self._browser = await chromium.connect_over_cdp(self._cdp_url)
            else:
                self._browser = await chromium.launch(
                    executable_path=self._executable, args=list(CHROMIUM_FLAGS)
                )
            self.launches += 1
            return self._browser

    def _classify(self, exc: Exception, guard: GuardProxy, navigated: list[str]) -> tuple[str, str]:
        if isinstance(exc, TimeoutError):
            return "TIMEOUT", "the page did not render in time"
        message = str(exc).split("\n", 1)[0]
        for url in reversed(navigated):  # the hop that failed: a refused redirect target, say
            code = guard.failures.get(_authority(url)) or guard.failures.get(url)
            if code is not None:
                return code, f"{url}: {message}"
        url = navigated[0]
        if self._browser is None or not self._browser.is_connected():
            return "BROWSER_CRASHED", message
        if "crash" in message.lower():
            return "BROWSER_CRASHED", message
        for marker, mapped in NET_ERRORS.items():
            if marker in message:
                return mapped, message
        if isinstance(exc, PlaywrightError):
            return "RENDER_FAILED", message
        log.exception("rendering %s raised", url)
        return "RENDER_FAILED", f"{type(exc).__name__}: {message}"

    async def _dispose(self, context: BrowserContext | None, guard: GuardProxy) -> None:
        if context is not None:
            try:
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await context.close()
            except Exception as exc:  # a context that will not close: the browser is started again
                log.warning("a browser context did not close (%s); restarting the browser", exc)
                await self._restart()
        try:
            async with asyncio.timeout(GUARD_CLOSE_TIMEOUT_S):
                await guard.close()
        except TimeoutError:
            log.warning("a render's guard proxy did not close in time")

    async def _restart(self) -> None:
        async with self._starting:
            browser, self._browser = self._browser, None
            if browser is not None:
                with contextlib.suppress(Exception):
                    await browser.close()

    async def close(self) -> None:
        await self._restart()
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()
            self._playwright = None


def _follow_document(
    made: PlaywrightRequest, page: Page, navigated: list[str], sent: list[PlaywrightRequest]
) -> None:
    """Counts each request, and keeps the URL of each main-frame navigation, so a failure is charged
    to the hop that failed."""
    sent.append(made)
    if made.is_navigation_request() and made.frame == page.main_frame:
        navigated.append(made.url)


def _authority(url: str) -> str:
    """`host:port` as a browser names a tunnel's target."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
    return f"{host}:{port}"
