"""The console at `/ui`, driven in Debian's Chromium through Playwright, against a worker with auth on.

Each test acts as the person at the browser would: signs in with a token, clicks, reads what the
page shows, and, as an attacker would, forges requests the page never offered.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Page, async_playwright

from schemas.enums import JobStatus
from streams.web import overview
from streams.web.console.session import CSRF_COOKIE, SESSION_COOKIE
from tests.browser_pages import Pages, chromium_or_skip, serving_pages
from tests.console_sessions import console_cookies, login_csrf
from tests.e2e.conftest import Origin, running_system, worker_settings
from tests.principals import ISSUED, PRINCIPALS

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.one_broker]
TERMINAL = {"SUCCEEDED", "DEAD_LETTER", "CANCELLED", "REJECTED"}


@dataclass
class Console:
    base: str
    browser: Browser
    origin: Origin
    pages: Pages
    jobs: dict[str, str] = field(default_factory=dict)  # what each job shows, by name

    def api(self, principal: str) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {ISSUED[principal].token}"}
        return httpx.AsyncClient(base_url=self.base, headers=headers, timeout=30)

    async def submit(self, principal: str, url: str, **fields: Any) -> httpx.Response:
        async with self.api(principal) as http:
            return await http.post("/jobs", json={"caller_identity": principal, "url": url, **fields})

    async def finished(self, job_id: str, principal: str = "admin") -> dict[str, Any]:
        async with self.api(principal) as http:
            for _ in range(600):
                answer = await http.get(f"/jobs/{job_id}")
                if answer.status_code == 200 and answer.json()["state"] in TERMINAL:
                    found: dict[str, Any] = answer.json()
                    return found
                await asyncio.sleep(0.1)
        raise AssertionError(f"job {job_id} did not finish")

    @contextlib.asynccontextmanager
    async def signed_in(self, principal: str, timezone_id: str | None = None) -> AsyncIterator[Watched]:
        context = await self.browser.new_context(base_url=self.base, timezone_id=timezone_id)
        cookies = await console_cookies(self.base, ISSUED[principal].token)
        await context.add_cookies([{"name": n, "value": v, "url": self.base} for n, v in cookies.items()])
        try:
            yield await watched(context)
        finally:
            await context.close()


@dataclass
class Watched:
    """A page, and every console error or uncaught exception it met."""

    context: BrowserContext
    page: Page
    errors: list[str]

    async def open(self, path: str) -> int:
        answer = await self.page.goto(path)
        assert answer is not None
        await self.page.wait_for_load_state("networkidle")
        return answer.status

    async def post(self, path: str, form: dict[str, str]) -> httpx.Response:
        """A request the page never offered, with this browser's cookies, as a forger would send it."""
        cookies = {cookie["name"]: cookie["value"] for cookie in await self.context.cookies()}
        base = self.page.url.split("/ui", 1)[0]
        async with httpx.AsyncClient(base_url=base, cookies=cookies) as http:
            return await http.post(path, data=form)


async def watched(context: BrowserContext) -> Watched:
    page = await context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return Watched(context, page, errors)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def console(broker, origin: Origin, tmp_path_factory) -> AsyncIterator[Console]:
    settings = worker_settings(
        broker.bootstrap,
        tmp_path_factory.mktemp("console"),
        auth_enabled=True,
        principals=PRINCIPALS,
        peer_secret="the-peer-secret-of-the-console-tests-0123456789",
        browser_executable=chromium_or_skip(),
        allow_private_networks=False,
        allowed_networks=["127.0.0.1/32"],
        routes={
            "direct": {"kind": "direct", "price_per_gb": "100", "budget": "50", "period_s": 3600},
            "browser": {"kind": "browser"},
        },
        profiles={"http.fetch": (8_000, 2)},
    )
    async with (
        serving_pages() as pages,
        running_system(settings) as system,
        async_playwright() as playwright,
    ):
        assert system.worker is not None
        browser = await playwright.chromium.launch(executable_path=chromium_or_skip())
        try:
            found = Console(f"http://127.0.0.1:{system.worker.web_port}", browser, origin, pages)
            await _jobs_of_every_outcome(found)
            yield found
        finally:
            await browser.close()


async def _jobs_of_every_outcome(console: Console) -> None:
    submitted = {
        "succeeded": await console.submit("svc-a", console.origin.url("/page/console-ok")),
        "hostile": await console.submit("svc-a", console.origin.url("/hostile/console")),
        "dead": await console.submit("svc-a", console.origin.url("/missing/console-dead")),
        "screenshot": await console.submit(
            "svc-a", console.pages.url("/late"), job_type="browser.render", capture_mode="SCREENSHOT"
        ),
        "other": await console.submit("svc-b", console.origin.url("/page/svc-b-secret")),
        "rejected": await console.submit("svc-a", console.origin.url("/page/x"), job_type="no.such.type"),
    }
    for name, answer in submitted.items():
        assert answer.status_code in (200, 201, 422), (name, answer.text)
        console.jobs[name] = answer.json()["job_id"]
    for name in ("succeeded", "hostile", "dead", "screenshot", "other"):
        await console.finished(console.jobs[name])


async def test_signing_in_sets_a_strict_httponly_cookie_and_pages_carry_a_strict_csp(console):
    context = await console.browser.new_context(base_url=console.base)
    try:
        visit = await watched(context)
        await visit.open("/ui")
        assert "/ui/login" in visit.page.url
        await visit.page.fill("input[name=token]", "not-a-token")
        await visit.page.click("button[type=submit]")
        assert "matches no principal" in await visit.page.inner_text("main")
        visit.errors.clear()  # the refused sign-in is answered 401, which the browser logs
        await visit.page.fill("input[name=token]", ISSUED["viewer"].token)
        await visit.page.click("button[type=submit]")
        await visit.page.wait_for_url("**/ui")
        assert "viewer · VIEWER" in await visit.page.inner_text("#principal")
        cookies = {cookie["name"]: cookie for cookie in await context.cookies()}
        for name in (SESSION_COOKIE, CSRF_COOKIE):
            assert cookies[name]["httpOnly"] is True
            assert cookies[name]["sameSite"] == "Strict"
        answer = await visit.page.goto("/ui/jobs")
        assert answer is not None
        policy = answer.headers["content-security-policy"]
        assert "script-src 'self'" in policy
        assert "unsafe-inline" not in policy
        assert "frame-ancestors 'none'" in policy
        assert visit.errors == []
    finally:
        await context.close()


async def test_every_page_loads_without_console_errors(console):
    paths = ["/ui", "/ui/jobs", "/ui/dead-letters", "/ui/routes"]
    paths += [f"/ui/jobs/{job_id}" for job_id in console.jobs.values()]
    async with console.signed_in("admin") as visit:
        for path in paths:
            assert await visit.open(path) == 200, path
            assert visit.errors == [], (path, visit.errors)
        await visit.open("/ui")
        assert await visit.page.locator(".chart canvas").count() >= 1  # the chart was drawn
        states = await visit.page.inner_text("#states")
        assert "SUCCEEDED" in states
        assert "DEAD_LETTER" in states
        assert console.base.removeprefix("http://") in await visit.page.inner_text("#workers")
        processes = await visit.page.inner_text("#processes")
        assert f"{os.getpid()}\tserving\t0" in processes  # the console's worker runs in this process


async def test_the_jobs_table_filters_and_pages(console):
    async with console.signed_in("admin") as visit:
        await visit.open("/ui/jobs?state=DEAD_LETTER")
        rows = visit.page.locator("#job-rows tr[data-job]")
        assert await rows.count() >= 1
        for text in await rows.all_inner_texts():
            assert "DEAD_LETTER" in text
        await visit.open(f"/ui/jobs?q={console.jobs['screenshot'][:8]}")
        assert await rows.count() == 1
        await visit.open("/ui/jobs?q=hostile/console")
        assert [await row.get_attribute("data-job") for row in await rows.all()] == [console.jobs["hostile"]]
        await visit.open("/ui/jobs?host=127.0.0.1&caller=svc-b")
        assert [await row.get_attribute("data-job") for row in await rows.all()] == [console.jobs["other"]]

        await visit.open("/ui/jobs?limit=2")
        first = [await row.get_attribute("data-job") for row in await rows.all()]
        await visit.page.click("#next-page")
        await visit.page.wait_for_load_state("networkidle")
        second = [await row.get_attribute("data-job") for row in await rows.all()]
        assert len(first) == 2
        assert second
        assert not set(first) & set(second)
        assert visit.errors == []


async def test_a_completion_while_the_page_is_open_appears_without_a_reload(console):
    async with console.signed_in("svc-a") as visit:
        await visit.open("/ui/jobs")
        await visit.page.evaluate("window.stillTheSamePage = true")
        answer = await console.submit("svc-a", console.origin.url("/page/appears-live"))
        job_id = answer.json()["job_id"]
        row = visit.page.locator(f"#job-rows tr[data-job='{job_id}']")
        await row.filter(has_text="SUCCEEDED").wait_for(timeout=30_000)
        assert await visit.page.evaluate("window.stillTheSamePage") is True
        assert visit.errors == []


async def test_a_jobs_timeline_lists_its_events_in_order(console):
    job_id = console.jobs["dead"]
    async with console.api("admin") as http:
        events = (await http.get(f"/jobs/{job_id}/events")).json()["items"]
    async with console.signed_in("admin") as visit:
        await visit.open(f"/ui/jobs/{job_id}")
        shown = await visit.page.locator("#timeline li").evaluate_all(
            "items => items.map(item => item.dataset.type)"
        )
        assert shown == [event["type"] for event in events]
        assert shown[0] == "JobAccepted"
        assert shown[-1] == "JobDeadLettered"
        assert "404" in await visit.page.inner_text("#attempts")


async def test_a_screenshot_shows_as_an_image(console):
    async with console.signed_in("svc-a") as visit:
        await visit.open(f"/ui/jobs/{console.jobs['screenshot']}")
        image = visit.page.locator("img.preview")
        assert await image.count() == 1
        width = await image.evaluate("element => element.complete && element.naturalWidth")
        assert width == 1280
        assert visit.errors == []


async def test_a_stored_page_with_script_is_shown_as_inert_text(console):
    async with console.signed_in("svc-a") as visit:
        await visit.open(f"/ui/jobs/{console.jobs['hostile']}")
        source = await visit.page.inner_text("pre.source")
        assert '<script>window.pwned = "script"</script>' in source
        assert "onerror=" in source
        assert await visit.page.evaluate("window.pwned === undefined")
        assert await visit.page.locator("main img[src='x']").count() == 0
        assert visit.errors == []


async def test_a_viewer_sees_no_action_and_a_forged_one_is_refused(console):
    job_id = console.jobs["dead"]
    async with console.signed_in("viewer") as visit:
        await visit.open(f"/ui/jobs/{job_id}")
        assert await visit.page.locator("#actions, form.action").count() == 0
        await visit.open("/ui/dead-letters")
        assert await visit.page.locator("#redrive-selected, input[name=job]").count() == 0
        csrf = await visit.page.locator("input[name=csrf]").first.get_attribute("value") or ""
        forged = await visit.post(f"/ui/jobs/{job_id}/redrive", {"csrf": csrf, "reason": "forged"})
        assert forged.status_code == 403
        assert "may not redrive" in forged.text
        forged = await visit.post("/ui/dead-letters/redrive", {"csrf": csrf, "reason": "x", "job": job_id})
        assert forged.status_code == 403
    async with console.signed_in("admin") as visit:
        await visit.open("/ui")
        no_token = await visit.post(f"/ui/jobs/{job_id}/redrive", {"csrf": "guessed" * 8, "reason": "x"})
        assert no_token.status_code == 403
        assert "CSRF" in no_token.text
        assert (await console.finished(job_id))["state"] == "DEAD_LETTER"


async def test_an_operator_cancels_a_job_and_the_audit_shows_it(console):
    answer = await console.submit("svc-a", console.origin.url("/slow/console-cancel"))
    job_id = answer.json()["job_id"]
    async with console.signed_in("operator") as visit:
        await visit.open(f"/ui/jobs/{job_id}")
        await visit.page.fill("form.action input[name=reason]", "stuck on a slow origin")
        await visit.page.click("button[data-action=cancel]")
        await visit.page.wait_for_selector("#done")
        await visit.page.locator("#job-state", has_text="CANCELLED").wait_for(timeout=30_000)
        await visit.open(f"/ui/jobs/{job_id}")
        audit = await visit.page.inner_text("#audit")
        assert "JOB_CANCEL" in audit
        assert "operator (OPERATOR)" in audit
        assert "stuck on a slow origin" in audit
        assert visit.errors == []


async def test_a_service_cannot_see_another_callers_job(console):
    other = console.jobs["other"]
    async with console.signed_in("svc-b") as visit:
        assert await visit.open(f"/ui/jobs/{other}") == 200
    async with console.signed_in("svc-a") as visit:
        assert await visit.open(f"/ui/jobs/{other}") == 404
        assert "svc-b-secret" not in await visit.page.content()
        await visit.open("/ui/jobs")
        listed = await visit.page.inner_text("#jobs")
        assert "svc-b" not in listed
        await visit.open("/ui/jobs?q=svc-b-secret")
        assert await visit.page.locator("#job-rows tr[data-job]").count() == 0
        await visit.open(f"/ui/jobs?q={other[:13]}")
        assert await visit.page.locator("#job-rows tr[data-job]").count() == 0
        assert await visit.open("/ui/jobs?caller=svc-b") == 403
        await visit.open("/ui/dead-letters")
        assert "svc-b" not in await visit.page.inner_text("main")
        (artifact,) = (await console.finished(other))["artifacts"]
        assert await visit.open(f"/ui/artifacts/{artifact['artifact_id']}") == 404


async def test_an_admin_redrives_dead_letters_in_bulk_from_their_group(console):
    answer = await console.submit("svc-a", console.origin.url("/missing/console-bulk"))
    job_id = answer.json()["job_id"]
    assert (await console.finished(job_id))["state"] == "DEAD_LETTER"
    async with console.signed_in("admin") as visit:
        await visit.open("/ui/dead-letters")
        group = visit.page.locator("section[data-failure='HTTP_404']")
        await group.locator(f"input[name=job][value='{job_id}']").check()
        await visit.page.fill("input[name=reason]", "origin fixed")
        await visit.page.click("#redrive-selected")
        await visit.page.wait_for_selector("#results")
        assert f"{job_id}\tredriven" in await visit.page.inner_text("#results")
        await visit.open(f"/ui/jobs/{job_id}")
        assert "JOB_REDRIVE" in await visit.page.inner_text("#audit")
        assert visit.errors == []


async def test_a_routes_budget_shows_as_a_gauge_and_its_spend_as_a_chart(console):
    async with console.signed_in("viewer") as visit:
        await visit.open("/ui/routes")
        direct = visit.page.locator("section[data-route='direct']")
        meter = direct.locator("meter")
        assert float(await meter.get_attribute("max") or "0") == 50
        assert float(await meter.get_attribute("value") or "0") > 0  # the jobs above spent on it
        assert await direct.locator(".chart canvas").count() == 1
        unmetered = await visit.page.locator("section[data-route='browser']").inner_text()
        assert "not metered" in unmetered
        assert "Granted" not in unmetered  # no zeros that read as nothing went through it
        assert visit.errors == []


async def test_the_overview_gives_a_service_its_own_jobs_and_readers_the_cluster(console):
    async with console.api("svc-b") as http:
        mine = (await http.get("/overview")).json()
        cache = await http.get("/cache", params={"url": console.origin.url("/page/console-ok")})
        assert cache.status_code == 403  # cache entries name other callers' jobs
    assert mine["cluster"] is None
    assert mine["states"] == {"SUCCEEDED": 1}  # its one job, none of svc-a's
    assert [load["host"] for load in mine["hosts"]] == ["127.0.0.1"]
    async with console.api("viewer") as http:
        everything = (await http.get("/overview")).json()
    assert sum(everything["cluster"]["jobs"].values()) >= len(console.jobs) - 1  # the rejected one is no job
    assert list(everything["cluster"]["workers"]) == [console.base]
    [process] = everything["cluster"]["processes"]
    assert (process["pid"], process["state"], process["url"]) == (os.getpid(), "serving", console.base)
    assert everything["cluster"]["unowned"] == []
    assert everything["outcomes"]["DEAD_LETTER"] >= 1
    async with httpx.AsyncClient(base_url=console.base) as anonymous:
        assert (await anonymous.get("/overview")).status_code == 401


async def test_signing_in_goes_back_only_to_a_console_page(console):
    async with httpx.AsyncClient(base_url=console.base) as http:
        csrf = await login_csrf(http)
        for target, expected in (
            ("/ui/jobs?state=SUCCEEDED", "/ui/jobs?state=SUCCEEDED"),
            ("https://evil.example/", "/ui"),
            ("//evil.example/ui", "/ui"),
            ("/ui\\\\evil.example", "/ui"),
        ):
            form = {"token": ISSUED["viewer"].token, "next": target, "csrf": csrf}
            answer = await http.post("/ui/login", data=form)
            assert answer.status_code == 303
            assert answer.headers["location"] == expected
        http.cookies.delete(SESSION_COOKIE)
        answer = await http.get("/ui/jobs")
        assert answer.status_code == 303
        assert answer.headers["location"].startswith("/ui/login?next=")


async def test_last_hour_panels_say_when_they_are_of_the_newest_jobs_only(console, monkeypatch):
    async with console.signed_in("admin") as visit:
        await visit.open("/ui")
        headings = await visit.page.locator("h2").all_inner_texts()
        assert "Busiest hosts, last hour" in headings
        assert "from all" in await visit.page.inner_text("main")
        monkeypatch.setattr(overview, "MOST_RECENT_JOBS", 3)  # fewer than the jobs of the last hour
        await visit.open("/ui")
        headings = await visit.page.locator("h2").all_inner_texts()
        assert "Busiest hosts, last hour (of the newest 3 jobs)" in headings
        assert "Outcomes, last hour (of the newest 3 jobs)" in headings
        assert "from the newest 3 jobs accepted in the last hour; more were" in await visit.page.inner_text(
            "main"
        )
        assert visit.errors == []


async def test_a_wrong_job_id_an_empty_redrive_and_the_timeline_are_said_in_words(console):
    async with console.signed_in("admin") as visit:
        assert await visit.open("/ui/jobs/nope") == 404
        problem = await visit.page.inner_text("#problem")
        assert "no job 'nope'" in problem
        assert "UUID" in problem
        assert "Input should" not in problem  # not the request validator's words
        job_id = console.jobs["dead"]
        assert await visit.open(f"/ui/jobs/{job_id[:8]}") == 200  # the short id the lists show
        timeline = await visit.page.inner_text("#timeline")
        assert "{'" not in timeline
        assert "['" not in timeline
        assert "request url http" in timeline
        await visit.open("/ui/dead-letters")
        await visit.page.fill("input[name=reason]", "nothing ticked")
        await visit.page.click("#redrive-selected")
        await visit.page.wait_for_selector("#problem")
        assert "no job was selected" in await visit.page.inner_text("#problem")


async def test_a_visual_monitors_page_shows_the_changed_pixels_marked_to_its_readers_only(console):
    poster = {
        "name": "poster",
        "url": console.pages.url("/poster"),
        "every_s": 10,
        "job_type": "browser.render",
        "capture_mode": "SCREENSHOT",
        "render": {"viewport_width": 640, "viewport_height": 480},
        "visual_threshold": 0.05,
    }
    async with console.api("svc-a") as http:
        created = await http.post("/monitors", json=poster)
        assert created.status_code == 201, created.text
        monitor_id = created.json()["monitor_id"]
        await changes_of(http, monitor_id, 1)
        console.pages.poster_colour = "#2e7d32"
        repainted = (await changes_of(http, monitor_id, 2))[0]
    image_path = f"/ui{repainted['visual']['difference']['download_path']}"
    async with console.signed_in("svc-a") as visit:
        assert await visit.open(f"/ui/monitors/{monitor_id}") == 200
        assert "more than 5.00% of pixels changed" in await visit.page.inner_text("#compares")
        assert "of pixels changed (threshold 5.00%)" in await visit.page.inner_text("#changes")
        image = visit.page.locator("#changes img.difference")
        assert await image.get_attribute("src") == image_path
        assert await image.evaluate("image => image.complete && image.naturalWidth") == 640
        assert visit.errors == []
    async with console.signed_in("svc-b") as visit:
        assert await visit.open(image_path) == 404


async def changes_of(http: httpx.AsyncClient, monitor_id: str, count: int) -> list[dict[str, Any]]:
    """The monitor's changes, newest first, once there are `count`."""
    for _ in range(600):
        items: list[dict[str, Any]] = (await http.get(f"/monitors/{monitor_id}/changes")).json()["items"]
        if len(items) >= count:
            return items
        await asyncio.sleep(0.1)
    raise AssertionError(f"monitor {monitor_id} found fewer than {count} changes")


async def test_a_monitor_page_shows_its_checks_and_its_changes_diff_as_inert_text(console):
    url = console.origin.url("/page/&lt;img%20src=x%20onerror=window.pwned=1&gt;")
    async with console.api("svc-a") as http:
        body = {"name": "console", "url": url, "every_s": 3600, "drop": ["^never$"], "insensitive": True}
        created = await http.post("/monitors", json=body)
        assert created.status_code == 201, created.text
        monitor_id = created.json()["monitor_id"]
        shop = {
            "name": "shop",
            "url": console.origin.url("/product/%3Cb%3E39.90%3C/b%3E"),
            "every_s": 3600,
            "product": True,
        }
        shop_id = (await http.post("/monitors", json=shop)).json()["monitor_id"]
        for _ in range(300):
            if all(
                [
                    (await http.get(f"/monitors/{one}/changes")).json()["items"]
                    for one in (monitor_id, shop_id)
                ]
            ):
                break
            await asyncio.sleep(0.1)
    async with console.signed_in("svc-a") as visit:
        assert await visit.open("/ui/monitors") == 200
        assert monitor_id[:8] in await visit.page.inner_text("#monitors")
        assert await visit.open(f"/ui/monitors/{monitor_id}") == 200
        diff = await visit.page.inner_text("pre.diff")
        assert "<img src=x onerror=window.pwned=1>" in diff  # the origin echoes its decoded path
        words = visit.page.locator("pre.word-diff ins")  # the first content, all of it added
        assert "<img src=x onerror=window.pwned=1>" in await words.first.inner_text()
        compares = await visit.page.inner_text("#compares")
        assert "lines matching ^never$ dropped" in compares
        assert "case and whitespace ignored" in compares
        assert await visit.page.locator("main img[src='x']").count() == 0
        assert await visit.page.evaluate("window.pwned === undefined")
        assert "NEW" in await visit.page.inner_text("#changes")
        assert "SUCCEEDED" in await visit.page.inner_text("#checks")
        assert await visit.open(f"/ui/monitors/{shop_id}") == 200
        assert "the product's offer" in await visit.page.inner_text("#compares")
        assert "<b>39.90</b> EUR" in await visit.page.inner_text("#changes .offer")  # as stated, inert
        assert await visit.page.locator("#changes b").count() == 0
        assert visit.errors == []
    async with console.signed_in("svc-b") as visit:
        assert await visit.open(f"/ui/monitors/{monitor_id}") == 404


async def test_the_jobs_page_leaves_monitors_checks_out_until_asked_and_marks_them(console):
    async with console.api("svc-a") as http:
        body = {"name": "checks-on-jobs-page", "url": console.origin.url("/page/checked"), "every_s": 3600}
        created = await http.post("/monitors", json=body)
        assert created.status_code == 201, created.text
        monitor_id = created.json()["monitor_id"]
        for _ in range(300):
            checks = (await http.get(f"/monitors/{monitor_id}/checks")).json()["items"]
            if checks and checks[0]["status"]:
                break
            await asyncio.sleep(0.1)
        check_job = checks[0]["check_job_id"]
        paused = await http.post(f"/monitors/{monitor_id}/pause", json={"reason": "site <b>maintenance</b>"})
        assert paused.status_code == 200, paused.text
    async with console.signed_in("svc-a") as visit:
        await visit.open("/ui/jobs")
        rows = visit.page.locator("#job-rows tr[data-job]")
        listed = [await row.get_attribute("data-job") for row in await rows.all()]
        assert listed
        assert check_job not in listed
        states = visit.page.locator("fieldset.states input[name=state]")
        assert await states.count() == len(JobStatus)
        succeeded = visit.page.locator("fieldset.states input[value=SUCCEEDED]")
        assert await succeeded.is_visible()
        await succeeded.check()
        await visit.page.check("input[name=checks]")
        await visit.page.click("form.filters button[type=submit]")
        await visit.page.wait_for_load_state("networkidle")
        assert "checks=1" in visit.page.url
        for text in await rows.all_inner_texts():
            assert "SUCCEEDED" in text
        check_row = visit.page.locator(f"#job-rows tr[data-job='{check_job}']")
        assert await check_row.count() == 1
        mark = check_row.locator("a.check")
        assert await mark.inner_text() == f"check of {monitor_id[:8]}"
        assert await mark.get_attribute("href") == f"/ui/monitors/{monitor_id}"
        await visit.open(f"/ui/monitors/{monitor_id}")
        assert "paused (site <b>maintenance</b>)" in await visit.page.inner_text("h1")
        assert visit.errors == []


async def test_the_overview_says_times_in_utc_and_counts_a_redriven_job_from_its_redrive(console):
    dead = (await console.submit("svc-c", console.origin.url("/missing/console-redriven"))).json()["job_id"]
    assert (await console.finished(dead))["state"] == "DEAD_LETTER"
    for refused in ("notaurl", "http:///no-host", "ftp://127.0.0.1/file"):
        assert (await console.submit("svc-c", refused)).json()["submission"] == "rejected"
    await asyncio.sleep(3)  # the redrive comes well after the first acceptance
    async with console.api("admin") as http:
        redriven = await http.post(f"/jobs/{dead}/redrive", json={"reason": "counted from here"})
        assert redriven.status_code == 200, redriven.text
    again = await console.finished(dead)
    assert again["redriven_at"] is not None
    async with console.signed_in("svc-c", timezone_id="America/Los_Angeles") as visit:
        await visit.open("/ui")
        hosts = await visit.page.locator("#hosts tbody tr").all_inner_texts()
        assert [row.split()[0] for row in hosts] == ["127.0.0.1"]  # the refused submissions asked no host
        latency = {
            name: float(figure.removesuffix(" ms").replace(",", ""))
            for figure, name in (
                text.splitlines() for text in await visit.page.locator("#latency > div").all_inner_texts()
            )
        }
        assert latency["p99"] < 2500, latency  # its second run's time, not the wait before the redrive
        chart = "document.querySelector('#completions .chart').chart"
        one_pm = datetime(2026, 12, 6, 13, 5, tzinfo=UTC).timestamp()
        ticks = await visit.page.evaluate(f"{chart}.axes[0].values({chart}, [{one_pm}])")
        assert ticks == ["13:05"]  # UTC and 24-hour, whatever the browser's time zone
        legend = await visit.page.locator("#completions .u-legend .u-value").all_inner_texts()
        assert re.fullmatch(r"\d\d:\d\d UTC", legend[0]), legend
        assert all(value != "--" and re.fullmatch(r"\d+\.\d\d", value) for value in legend[1:]), legend
        assert visit.errors == []


async def test_a_live_view_refused_with_429_backs_off_and_says_so(console):
    refused = 0

    async def busy(route: Any) -> None:
        nonlocal refused
        if refused < 2:
            refused += 1
            await route.fulfill(status=429, body="too many reads", headers={"Retry-After": "1"})
        else:
            await route.continue_()

    async with console.signed_in("svc-a") as visit:
        await visit.open(f"/ui/jobs/{console.jobs['succeeded']}")
        await visit.page.route("**/live", busy)
        notice = visit.page.locator("p.notice.busy[role=status]")
        await notice.wait_for(timeout=10_000)
        said = await notice.inner_text()
        assert "busy answering reads (429 too many reads)" in said
        assert re.search(r"the next try is in \d+ s", said)
        await notice.wait_for(state="detached", timeout=30_000)  # answered again: the notice goes
        assert refused == 2
        assert [error for error in visit.errors if "429" not in error] == []
