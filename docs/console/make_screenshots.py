"""Screenshots of every console page, for docs/console/: `python docs/console/make_screenshots.py`.

Starts `scrapestream dev` in a scratch directory, a loopback origin, jobs of every outcome, then
photographs each page in Chromium through Playwright, and stops what it started.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web
from playwright.async_api import async_playwright

HERE = Path(__file__).resolve().parent
SCRAPESTREAM = Path(sys.executable).with_name("scrapestream")
TERMINAL = {"SUCCEEDED", "DEAD_LETTER", "CANCELLED", "REJECTED"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def origin(request: web.Request) -> web.Response:
    name = request.path.strip("/")
    if name == "missing":
        return web.Response(status=404)
    if name == "slow":
        await asyncio.sleep(60)
    if name == "hostile":
        body = '<script>alert("never run")</script><img src="x" onerror="alert(1)">'
        return web.Response(text=f"<html><body>{body}</body></html>", content_type="text/html")
    page = f"<html><head><title>{name}</title></head><body><main><h1>Page {name}</h1></main></body></html>"
    return web.Response(text=page, content_type="text/html")


async def submit(http: httpx.AsyncClient, url: str, **fields: Any) -> str:
    answer = await http.post("/jobs", json={"caller_identity": "docs", "url": url, **fields})
    job_id: str = answer.json()["job_id"]
    return job_id


async def finished(http: httpx.AsyncClient, job_id: str) -> None:
    for _ in range(600):
        if (await http.get(f"/jobs/{job_id}")).json()["state"] in TERMINAL:
            return
        await asyncio.sleep(0.1)


async def photograph(base: str, origin_url: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        for _ in range(300):
            try:
                if (await http.get("/readyz")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
        jobs = [await submit(http, f"{origin_url}/page-{number}") for number in range(8)]
        hostile = await submit(http, f"{origin_url}/hostile")
        jobs += [hostile, await submit(http, f"{origin_url}/missing")]
        shot = await submit(
            http, f"{origin_url}/rendered", job_type="browser.render", capture_mode="SCREENSHOT"
        )
        slow = await submit(http, f"{origin_url}/slow")
        await http.post(f"/jobs/{slow}/cancel", json={"reason": "shown cancelled in the docs"})
        for job_id in [*jobs, shot, slow]:
            await finished(http, job_id)
    pages = {
        "overview": "/ui",
        "jobs": "/ui/jobs",
        "job-screenshot": f"/ui/jobs/{shot}",
        "job-hostile-page": f"/ui/jobs/{hostile}",
        "dead-letters": "/ui/dead-letters",
        "routes": "/ui/routes",
    }
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=shutil.which("chromium"))
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        for name, path in pages.items():
            await page.goto(base + path)
            await page.wait_for_load_state("networkidle")
            await page.screenshot(path=str(HERE / f"{name}.png"), full_page=True)
            print(f"docs/console/{name}.png")
        await browser.close()


async def main() -> None:
    port = free_port()
    app = web.Application()
    app.router.add_get("/{name}", origin)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    origin_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    with tempfile.TemporaryDirectory() as scratch:
        environment = os.environ | {"SCRAPESTREAM_WEB_PORT": str(port)}
        dev = await asyncio.create_subprocess_exec(
            str(SCRAPESTREAM), "dev", "--allow-private", cwd=scratch, env=environment
        )
        try:
            await photograph(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{origin_port}")
        finally:
            dev.send_signal(signal.SIGINT)
            async with asyncio.timeout(60):
                await dev.wait()
            await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
