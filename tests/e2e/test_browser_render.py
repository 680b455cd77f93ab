"""`browser.render` end to end: a real worker drives Debian's Chromium against loopback pages."""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any
from uuid import UUID

import httpx
import pytest
import pytest_asyncio
from PIL import Image

from projections.monitors.visual import CHANGED_MARK
from schemas.enums import CaptureMode, ChangeKind, JobStatus, RejectionReason, TransportPolicy, TransportRoute
from schemas.events import CheckRecorded
from schemas.records import RenderOptions
from schemas.types import to_cost_scale
from streams.fetch.browser import most_held_s
from tests.browser_pages import LATE_TEXT, Pages, chromium_or_skip, png_size, serving_pages
from tests.e2e.conftest import System, running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")
PER_SECOND = Decimal("0.01")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pages() -> AsyncIterator[Pages]:
    async with serving_pages() as served:
        yield served


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(broker, tmp_path_factory) -> AsyncIterator[System]:
    settings = worker_settings(
        broker.bootstrap,
        tmp_path_factory.mktemp("browser"),
        browser_executable=chromium_or_skip(),
        allow_private_networks=False,
        allowed_networks=["127.0.0.1/32"],
        policy_classes={"STANDARD": {"timeout_s": 120.0}},  # a loaded machine renders within its timeout
        routes={
            "direct": {"kind": "direct"},
            "browser": {"kind": "browser", "price_per_browser_second": str(PER_SECOND)},
        },
    )
    async with running_system(settings) as running:
        yield running


async def download(system: System, artifact_id: UUID) -> bytes:
    assert system.worker is not None
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        response = await http.get(f"/artifacts/{artifact_id}")
        response.raise_for_status()
        return response.content


async def test_a_rendered_page_has_the_script_written_text_and_a_viewport_screenshot(system, pages):
    options = RenderOptions(wait_selector="#late", viewport_width=640, viewport_height=480)
    job = await system.submit(
        pages.url("/late"), job_type="browser.render", capture_mode=CaptureMode.SCREENSHOT, render=options
    )
    completion = await system.completion(job)
    assert completion.status is JobStatus.SUCCEEDED, completion.failure
    html, screenshot = completion.artifacts
    assert (html.content_type, screenshot.content_type) == ("text/html; charset=utf-8", "image/png")
    assert LATE_TEXT in (await download(system, html.artifact_id)).decode()
    assert png_size(await download(system, screenshot.artifact_id)) == (640, 480)
    (attempt,) = await system.attempts_seen(job)
    assert attempt.route is TransportRoute.BROWSER
    assert attempt.route_name == "browser"
    assert attempt.cost.browser_seconds > 0
    assert attempt.cost.actual == to_cost_scale(attempt.cost.browser_seconds * PER_SECOND)
    # The STANDARD class's 30 s, then closing the context and its proxy.
    assert attempt.cost.estimated == to_cost_scale(Decimal(str(most_held_s(30))) * PER_SECOND)
    assert attempt.blocked_requests == ()

    fetched = await system.submit(pages.url("/late"), idempotency_key="plain-fetch")
    fetched_completion = await system.completion(fetched)
    assert fetched_completion.status is JobStatus.SUCCEEDED
    (raw,) = fetched_completion.artifacts
    assert LATE_TEXT not in (await download(system, raw.artifact_id)).decode()


async def test_a_private_subresource_is_blocked_and_recorded_on_the_attempt(system, pages):
    job = await system.submit(
        pages.url("/private-image"), job_type="browser.render", capture_mode=CaptureMode.RENDERED_HTML
    )
    completion = await system.completion(job)
    assert completion.status is JobStatus.SUCCEEDED
    (attempt,) = await system.attempts_seen(job)
    assert attempt.blocked_requests == (pages.private("/pixel"),)
    assert pages.hits["/pixel"] == 0
    assert system.worker is not None
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        (shown,) = (await http.get(f"/jobs/{job}")).json()["attempts"]
    assert (shown["route"], shown["route_name"]) == ("BROWSER", "browser")
    assert shown["blocked_requests"] == [pages.private("/pixel")]


async def test_an_http_fetch_over_the_browser_transport_is_rendered(system, pages):
    job = await system.submit(
        pages.url("/late"),
        transport_policy=TransportPolicy.BROWSER,
        render=RenderOptions(wait_selector="#late"),
        idempotency_key="fetch-over-browser",
    )
    completion = await system.completion(job)
    assert completion.status is JobStatus.SUCCEEDED
    (html,) = completion.artifacts
    assert LATE_TEXT in (await download(system, html.artifact_id)).decode()


async def test_a_private_document_is_refused_without_a_retry(system, pages):
    job = await system.submit(pages.private("/plain"), job_type="browser.render")
    completion = await system.completion(job)
    assert completion.status is JobStatus.DEAD_LETTER
    assert completion.failure.code == "ADDRESS_REFUSED"
    assert len(await system.attempts_seen(job)) == 1


async def test_unusable_render_requests_are_rejected_with_their_reasons(system, pages):
    screenshot_over_http = await system.submit(
        pages.url("/plain"), capture_mode=CaptureMode.SCREENSHOT, idempotency_key="shot-over-http"
    )
    bad_wait = await system.submit(
        pages.url("/plain"), job_type="browser.render", render=RenderOptions(wait_until="forever")
    )
    chained = await system.submit(
        pages.url("/plain"), job_type="browser.render", render=RenderOptions(wait_selector="p >> text=plain")
    )
    assert (
        await system.completion(screenshot_over_http)
    ).failure.code == RejectionReason.UNSUPPORTED_CAPTURE_MODE
    assert (await system.completion(bad_wait)).failure.code == RejectionReason.INVALID_RENDER_OPTIONS
    assert (await system.completion(chained)).failure.code == RejectionReason.INVALID_RENDER_OPTIONS


async def test_the_read_api_lists_browser_render(system):
    assert system.worker is not None
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        listed = {item["name"]: item for item in (await http.get("/job-types")).json()["items"]}
    assert listed["browser.render"]["label"] == "Render a page in a headless browser"


@pytest.mark.parametrize("path", ["/redirect-out", "/redirect-out-tls"])
async def test_a_document_redirected_to_a_refused_address_fails_address_refused(system, pages, path):
    job = await system.submit(pages.url(path), job_type="browser.render")
    completion = await system.completion(job)
    assert completion.status is JobStatus.DEAD_LETTER
    assert completion.failure.code == "ADDRESS_REFUSED"
    assert pages.hits["/redirected"] == 0


@pytest.mark.timeout(660)
async def test_a_dom_larger_than_the_cap_is_refused_before_it_is_copied_out_of_the_page(system, pages):
    job = await system.submit(pages.url("/big-dom"), job_type="browser.render")
    # Waits as long as a loaded machine needs (bounded by the pytest timeout), asserting no duration.
    completion = await system.completion(job, timeout_s=600)
    assert completion.status is JobStatus.DEAD_LETTER
    assert completion.failure.code == "BODY_TOO_LARGE"
    assert "measures" in completion.failure.safe_message  # refused on the page's own measure


async def test_concurrent_renders_never_spend_past_a_browser_routes_budget(broker, pages, tmp_path):
    held_s = most_held_s(1.0)  # a render's deadline of one second, then closing its context and proxy
    budget = to_cost_scale(PER_SECOND * Decimal(str(held_s)) * 2)  # two renders' reservations, no more
    settings = worker_settings(
        broker.bootstrap,
        tmp_path,
        browser_executable=chromium_or_skip(),
        allowed_networks=["127.0.0.1/32"],
        browser_concurrency=3,
        policy_classes={"STANDARD": {"timeout_s": 1.0}},
        routes={
            "browser": {
                "kind": "browser",
                "price_per_browser_second": str(PER_SECOND),
                "budget": str(budget),
                "period_s": 86_400,
            }
        },
    )
    async with running_system(settings) as running:
        jobs = [
            await running.submit(pages.url("/hang"), job_type="browser.render", idempotency_key=f"hang-{n}")
            for n in range(3)
        ]
        attempts = [attempt for job in jobs for attempt in await running.attempts_seen(job)]
        assert running.worker is not None
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{running.worker.web_port}") as http:
            route = next(
                item for item in (await http.get("/routes")).json()["items"] if item["name"] == "browser"
            )
    rendered = [attempt for attempt in attempts if attempt.failure.code == "TIMEOUT"]
    assert rendered
    assert all(attempt.cost.actual <= attempt.cost.estimated for attempt in rendered)
    assert all(Decimal(period["spent"]) <= budget for period in route["periods"])


async def test_a_visual_monitor_announces_a_repainted_page_not_a_changed_counter(system, pages):
    assert system.worker is not None
    poster = {
        "name": "poster",
        "url": pages.url("/poster"),
        "every_s": 10,
        "job_type": "browser.render",
        "capture_mode": "SCREENSHOT",
        "render": {"viewport_width": 640, "viewport_height": 480},
        "visual_threshold": 0.05,
    }
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        refused = await http.post("/monitors", json=poster | {"name": "text", "job_type": "http.fetch"})
        assert refused.status_code == 400
        assert "SCREENSHOT" in refused.json()["message"]
        for _ in range(120):  # as the 503 says: retry while the partition settles on this worker
            created = await http.post("/monitors", json=poster)
            if created.status_code != 503:
                break
            await asyncio.sleep(0.5)
        assert created.status_code == 201, created.text
        monitor_id = UUID(created.json()["monitor_id"])
        await checks_of(system, monitor_id, 2)  # the baseline, then only the visitor count moved
        pages.poster_colour = "#c62828"
        checks = await checks_of(system, monitor_id, 3)
        assert [check.change for check in checks] == [ChangeKind.NEW, None, ChangeKind.CHANGED]
        assert len({check.fingerprint for check in checks}) == 3  # every screenshot differs in bytes
        repainted, first = (await http.get(f"/monitors/{monitor_id}/changes")).json()["items"]
        assert first["visual"] == {"ratio": 1.0, "threshold": 0.05, "difference": None}
        banner = 400 * 200 / (640 * 480)
        assert banner <= repainted["visual"]["ratio"] < banner + 0.01
        difference = repainted["visual"]["difference"]
        assert difference["download_path"].endswith(f"/changes/{checks[2].check_job_id}/difference")
        image = await http.get(difference["download_path"])
        assert image.status_code == 200, image.text
        assert image.headers["content-type"] == "image/png"
        assert png_size(image.content) == (640, 480)
        assert hashlib.sha256(image.content).hexdigest() == difference["sha256"]
        marked = Image.open(io.BytesIO(image.content)).convert("RGB")
        assert marked.getpixel((240, 140)) == CHANGED_MARK  # inside the banner
        assert marked.getpixel((600, 440)) != CHANGED_MARK
        missing = await http.get(f"/monitors/{monitor_id}/changes/{checks[1].check_job_id}/difference")
        assert missing.status_code == 404


async def checks_of(system: System, monitor_id: UUID, count: int) -> list[CheckRecorded]:
    """The monitor's first `count` recorded checks, once there are that many."""

    def checks(events: list[Any]) -> list[CheckRecorded]:
        return [e for e in events if isinstance(e, CheckRecorded) and e.job_id == monitor_id]

    await system.events.wait_for(lambda events: len(checks(events)) >= count, timeout_s=120)
    return checks(system.events.records)[:count]
