"""Monitors as a user meets them over HTTP: a page watched on a schedule, only its changes announced
(on the changes topic and in the monitor's history), and only its owner may see or change it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import feedparser
import httpx
import pytest
import pytest_asyncio
from aiohttp import web
from fpdf import FPDF

from schemas.enums import ChangeKind, OfferChangeKind
from schemas.events import ChangeDetected, CheckRecorded
from schemas.records import Offer, OfferChange
from schemas.work import MonitorChange
from tests.e2e.conftest import Observer, System, running_system, settled_ownership, worker_settings
from tests.principals import ISSUED, PRINCIPALS
from tests.servers import loopback

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.one_broker]
PAGE = """<html><body><main><h1>Pricing</h1><p>Price: {price} EUR</p></main>
<footer>Updated <span class="clock">{clock}</span></footer></body></html>"""

SCRAPESTREAM = str(Path(sys.executable).with_name("scrapestream"))


@dataclass
class WatchedPage:
    """A page that changes when the test says: it answers 304 to its current ETag, 404 when gone."""

    port: int = 0
    price: int = 9
    clock: str = "10:00"
    gone: bool = False
    answers: list[int] = field(default_factory=list)
    hooks: list[tuple[dict[str, str], dict[str, Any]]] = field(default_factory=list)
    product: dict[str, Any] = field(
        default_factory=lambda: {"name": "Kettle", "price": 39.9, "currency": "EUR"}
    )
    stock: list[str] = field(default_factory=lambda: ["Kettle", "Sold out", "Updated 10:00"])
    report: list[str] = field(default_factory=lambda: ["Quarterly report", "Revenue: 10 million EUR"])
    offer: dict[str, Any] = field(
        default_factory=lambda: {
            "price": "39.90",
            "priceCurrency": "EUR",
            "availability": "https://schema.org/InStock",
        }
    )
    served: int = 0

    @property
    def etag(self) -> str:
        return f'"{self.price}-{self.clock}"'

    async def handle(self, request: web.Request) -> web.Response:
        self.served += 1
        if request.path == "/api":  # a JSON API whose every answer differs outside the product
            return web.json_response({"served": self.served, "product": self.product})
        if request.path == "/stock":  # a product page whose visitor count changes on every answer
            lines = [*self.stock, f"Visitors today: {self.served}"]
            return web.Response(text="".join(f"<p>{line}</p>" for line in lines), content_type="text/html")
        if request.path == "/shop":  # a shop's product page: its offer in JSON-LD, its layout moving
            product = {
                "@context": "https://schema.org",
                "@type": "Product",
                "name": "Kettle",
                "offers": self.offer,
            }
            script = f'<script type="application/ld+json">{json.dumps(product)}</script>'
            body = f"<html><head>{script}</head><body><p>Visitors today: {self.served}</p></body></html>"
            return web.Response(text=body, content_type="text/html")
        if request.path == "/missing":
            return web.Response(status=404, text="never here")
        if request.path == "/report.pdf":
            return web.Response(body=pdf(self.report), content_type="application/pdf")
        if request.path == "/hooks":  # the monitor's callback receiver
            self.hooks.append((dict(request.headers), await request.json()))
            return web.Response(status=204)
        if self.gone:
            self.answers.append(404)
            return web.Response(status=404, text="gone")
        if request.headers.get("If-None-Match") == self.etag:
            self.answers.append(304)
            return web.Response(status=304, headers={"ETag": self.etag})
        self.answers.append(200)
        body = PAGE.format(price=self.price, clock=self.clock)
        return web.Response(text=body, content_type="text/html", headers={"ETag": self.etag})


def pdf(lines: list[str]) -> bytes:
    document = FPDF()
    document.add_page()
    document.set_font("helvetica", size=12)
    for line in lines:
        document.cell(text=line)
        document.ln()
    return bytes(document.output())


@dataclass
class Watching:
    system: System
    page: WatchedPage
    changes: Observer

    def url(self, path: str = "/pricing") -> str:
        return f"http://127.0.0.1:{self.page.port}{path}"

    def hook(self) -> str:
        return f"http://127.0.0.1:{self.page.port}/hooks"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def watching(broker, tmp_path_factory) -> AsyncIterator[Watching]:
    settings = worker_settings(
        broker.bootstrap,
        tmp_path_factory.mktemp("monitors"),
        auth_enabled=True,
        principals=PRINCIPALS,
        peer_secret="the-peer-secret-of-the-monitor-tests-0123456789",
    )
    page = WatchedPage()
    async with loopback(page.handle) as page.port, running_system(settings) as system:
        assert system.worker is not None
        await settled_ownership(system.worker, partitions=settings.partitions)
        changes = await Observer(settings.kafka_access, settings.topic("changes")).start()
        try:
            yield Watching(system, page, changes)
        finally:
            await changes.stop()


async def command_line(system: System, principal: str, *arguments: str) -> tuple[int, str]:
    """`scrapestream ARGUMENTS` as a user runs it against the system, with the principal's token."""
    assert system.worker is not None
    environment = {name: value for name, value in os.environ.items() if not name.startswith("SCRAPESTREAM_")}
    environment |= {
        "SCRAPESTREAM_URL": f"http://127.0.0.1:{system.worker.web_port}",
        "SCRAPESTREAM_TOKEN": ISSUED[principal].token,
        "COLUMNS": "120",
    }
    process = await asyncio.create_subprocess_exec(
        SCRAPESTREAM,
        *arguments,
        env=environment,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, output.decode()


def api(system: System, principal: str) -> httpx.AsyncClient:
    assert system.worker is not None
    headers = {"Authorization": f"Bearer {ISSUED[principal].token}"}
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}", headers=headers)


async def recorded(watching: Watching, monitor_id: UUID, count: int) -> list[CheckRecorded]:
    """The monitor's first `count` recorded checks, once there are that many."""

    def checks(records: list[Any]) -> list[CheckRecorded]:
        return [r for r in records if isinstance(r, CheckRecorded) and r.job_id == monitor_id]

    await watching.system.events.wait_for(lambda records: len(checks(records)) >= count, timeout_s=60)
    return checks(watching.system.events.records)[:count]


def changes_of(watching: Watching, monitor_id: UUID) -> list[MonitorChange]:
    return [
        r for r in watching.changes.records if isinstance(r, MonitorChange) and r.monitor_id == monitor_id
    ]


async def test_a_watched_page_announces_each_change_once_and_nothing_else(watching: Watching):
    page = watching.page
    body = {
        "name": "pricing",
        "url": watching.url(),
        "every_s": 10,
        "ignore": [".clock"],
        "callback_url": watching.hook(),
    }
    async with api(watching.system, "svc-a") as http:
        answer = await http.post("/monitors", json=body)
        assert answer.status_code == 201, answer.text
        monitor = answer.json()
        monitor_id = UUID(monitor["monitor_id"])
        assert (monitor["state"], monitor["caller_identity"]) == ("active", "svc-a")
        again = await http.post("/monitors", json=body)
        assert (again.status_code, again.json()["monitor_id"]) == (200, str(monitor_id))

        (first,) = await recorded(watching, monitor_id, 1)
        assert first.change is ChangeKind.NEW
        await recorded(watching, monitor_id, 2)  # asked with the ETag: 304, no body
        assert page.answers[:2] == [200, 304]
        page.clock = "10:05"  # only what the monitor ignores
        third = (await recorded(watching, monitor_id, 3))[-1]
        assert (third.http_status, third.change) == (200, None)
        page.price = 10
        fourth = (await recorded(watching, monitor_id, 4))[-1]
        assert fourth.change is ChangeKind.CHANGED
        page.gone = True
        assert (await recorded(watching, monitor_id, 5))[-1].change is ChangeKind.REMOVED
        page.gone = False
        assert (await recorded(watching, monitor_id, 6))[-1].change is ChangeKind.RESTORED

        await watching.changes.wait_for(lambda _: len(changes_of(watching, monitor_id)) >= 4)
        published = changes_of(watching, monitor_id)
        kinds = [change.kind for change in published]
        assert kinds == [ChangeKind.NEW, ChangeKind.CHANGED, ChangeKind.REMOVED, ChangeKind.RESTORED]
        changed = published[1]
        assert "-Price: 9 EUR" in changed.diff
        assert "+Price: 10 EUR" in changed.diff
        assert (changed.lines_added, changed.lines_removed) == (1, 1)
        assert changed.previous_artifact is not None
        assert changed.current_artifact is not None
        assert "10:0" not in changed.diff  # the clock it ignores
        detected = [e for e in watching.system.events.of_job(monitor_id) if isinstance(e, ChangeDetected)]
        assert len(detected) == 4

        listed = (await http.get(f"/monitors/{monitor_id}/changes")).json()["items"]
        assert [item["kind"] for item in listed] == ["RESTORED", "REMOVED", "CHANGED", "NEW"]
        newest = (await http.get(f"/monitors/{monitor_id}/changes", params={"limit": 2})).json()["items"]
        assert [item["kind"] for item in newest] == ["RESTORED", "REMOVED"]
        checks = (await http.get(f"/monitors/{monitor_id}/checks")).json()["items"]
        assert [check["change"] for check in checks[-6:]][::-1] == [
            "NEW",
            None,
            None,
            "CHANGED",
            "REMOVED",
            "RESTORED",
        ]
        viewed = (await http.get(f"/monitors/{monitor_id}")).json()
        assert viewed["changes"] == 4
        assert viewed["checks"] >= 6
    for _ in range(100):  # each change's callback, signed, and none for an unchanged check
        if len(page.hooks) >= 4:
            break
        await asyncio.sleep(0.1)
    assert [hook["kind"] for _, hook in page.hooks] == ["NEW", "CHANGED", "REMOVED", "RESTORED"]
    assert {hook["monitor_id"] for _, hook in page.hooks} == {str(monitor_id)}
    assert len({headers["webhook-id"] for headers, _ in page.hooks}) == 4
    assert all(headers["webhook-signature"].startswith("v1,") for headers, _ in page.hooks)
    assert "+Price: 10 EUR" in page.hooks[1][1]["diff"]
    async with api(watching.system, "svc-a") as http:
        refused = await http.post(f"/monitors/{monitor_id}/replay-callback", json={"reason": "lost it"})
        assert refused.status_code == 403, refused.text
    async with api(watching.system, "operator") as http:
        replayed = await http.post(f"/monitors/{monitor_id}/replay-callback", json={"reason": "lost it"})
        assert replayed.json()["outcome"] == "ALLOWED", replayed.text
        for _ in range(100):
            if len(page.hooks) >= 5:
                break
            await asyncio.sleep(0.1)
        assert page.hooks[4][0]["webhook-id"] == page.hooks[3][0]["webhook-id"]  # the latest change's
        assert page.hooks[4][1] == page.hooks[3][1]
        metrics = (await http.get("/metrics")).text
    assert 'scrapestream_monitor_checks_total{outcome="changed"} 4.0' in metrics
    assert "scrapestream_monitor_check_lateness_seconds_count" in metrics


async def test_dead_letters_leave_checks_out_or_list_only_them_when_asked(watching: Watching):
    async with api(watching.system, "svc-a") as http:
        body = {"name": "missing", "url": watching.url("/missing"), "every_s": 3600}
        assert (await http.post("/monitors", json=body)).status_code == 201
        submitted = await http.post(
            "/jobs", json={"caller_identity": "svc-a", "url": watching.url("/missing")}
        )
        job_id = submitted.json()["job_id"]

        async def dead(**checks: str) -> list[dict[str, Any]]:
            answer = await http.get("/dead-letters", params=checks)
            assert answer.status_code == 200, answer.text
            return [job for job in answer.json()["items"] if job["request"]["url"].endswith("/missing")]

        async with asyncio.timeout(60):
            while len(await dead()) < 2:  # noqa: ASYNC110 - the jobs dead-letter in the worker
                await asyncio.sleep(0.2)
        assert [job["job_id"] for job in await dead(checks="false")] == [job_id]
        (check,) = await dead(checks="true")
        assert check["monitor_id"] is not None


async def test_pause_resume_and_edit_over_http(watching: Watching):
    async with api(watching.system, "svc-a") as http:
        body = {"name": "edited", "url": watching.url(), "every_s": 3600}
        monitor_id = (await http.post("/monitors", json=body)).json()["monitor_id"]
        (first,) = await recorded(watching, UUID(monitor_id), 1)  # its state is kept from then on
        paused = await http.post(f"/monitors/{monitor_id}/pause", json={"reason": "holiday"})
        assert paused.status_code == 200, paused.text
        assert (paused.json()["state"], paused.json()["next_check_at"]) == ("paused", None)
        resumed = (await http.post(f"/monitors/{monitor_id}/resume", json={"reason": "back"})).json()
        assert resumed["state"] == "active"
        assert resumed["next_check_at"] is not None
        edited = await http.patch(f"/monitors/{monitor_id}", json={"every_s": 7200, "watch": ["main"]})
        assert edited.status_code == 200, edited.text
        assert (edited.json()["schedule"]["every_s"], edited.json()["watch"]) == (7200, ["main"])
        refused = await http.patch(f"/monitors/{monitor_id}", json={"every_s": 1})
        assert refused.status_code == 400
        assert "interval" in refused.json()["message"]
        unknown = await http.patch(f"/monitors/{monitor_id}", json={"colour": "red"})
        assert unknown.status_code == 400
        conflict = await http.post("/monitors", json=body | {"every_s": 60})
        assert conflict.status_code == 409
        deleted = await http.delete(f"/monitors/{monitor_id}")
        assert deleted.json()["state"] == "deleted"
        assert (await http.post(f"/monitors/{monitor_id}/pause", json={"reason": "x"})).status_code == 409
        as_of = (await http.get(f"/monitors/{monitor_id}", params={"as_of": resumed["created_at"]})).json()
        assert as_of["code"] == "out_of_history"  # before the first check ended: told why, not guessed
        after_it = (first.occurred_at + timedelta(milliseconds=1)).isoformat()
        then = (await http.get(f"/monitors/{monitor_id}", params={"as_of": after_it})).json()
        assert then["state"] == "active"


async def test_a_service_neither_sees_nor_changes_another_callers_monitor(watching: Watching):
    async with api(watching.system, "svc-a") as http:
        body = {"name": "private", "url": watching.url(), "every_s": 3600}
        monitor_id = (await http.post("/monitors", json=body)).json()["monitor_id"]
        as_other = await http.post("/monitors", json=body | {"caller_identity": "svc-b"})
        assert as_other.status_code == 403
    async with api(watching.system, "svc-b") as http:
        listed = (await http.get("/monitors")).json()["items"]
        assert monitor_id not in {item["monitor_id"] for item in listed}
        assert (await http.get("/monitors", params={"caller": "svc-a"})).status_code == 403
        for answer in (
            await http.get(f"/monitors/{monitor_id}"),
            await http.get(f"/monitors/{monitor_id}/checks"),
            await http.get(f"/monitors/{monitor_id}/changes"),
            await http.patch(f"/monitors/{monitor_id}", json={"every_s": 60}),
            await http.post(f"/monitors/{monitor_id}/pause", json={"reason": "mine now"}),
            await http.delete(f"/monitors/{monitor_id}"),
        ):
            assert answer.status_code == 404, answer.text
    async with api(watching.system, "svc-a") as http:
        mine = (await http.get("/monitors", params={"limit": 1})).json()
        assert len(mine["items"]) == 1
        assert mine["next_cursor"] is not None
        everything = (await http.get("/monitors")).json()["items"]
        assert {item["caller_identity"] for item in everything} == {"svc-a"}
        assert monitor_id in {item["monitor_id"] for item in everything}
    async with api(watching.system, "viewer") as http:
        assert (await http.get(f"/monitors/{monitor_id}")).status_code == 200
        assert (await http.post(f"/monitors/{monitor_id}/pause", json={"reason": "x"})).status_code == 403
    async with api(watching.system, "operator") as http:
        paused = await http.post(f"/monitors/{monitor_id}/pause", json={"reason": "ops"})
        assert paused.json()["state"] == "paused"
    await asyncio.sleep(0)


async def test_selections_triggers_products_and_pdfs_announce_only_their_changes_in_feeds_too(
    watching: Watching,
):
    page = watching.page
    selecting = {"name": "api", "url": watching.url("/api"), "every_s": 10, "select": "product"}
    triggered = {
        "name": "stock",
        "url": watching.url("/stock"),
        "every_s": 10,
        "trigger": ["in stock|sold out"],
        "drop": ["^visitors today"],
        "insensitive": True,
    }
    async with api(watching.system, "svc-b") as http:
        for hostile in ({"trigger": [r"(a)\1"]}, {"drop": ["x" * 201]}, {"select": "product.["}):
            refused = await http.post("/monitors", json=triggered | {"name": "refused"} | hostile)
            assert refused.status_code == 400, refused.text
            assert next(iter(hostile)) in refused.json()["message"]
        api_id = UUID((await http.post("/monitors", json=selecting)).json()["monitor_id"])
        reporting = {"name": "report", "url": watching.url("/report.pdf"), "every_s": 10}
        report_id = UUID((await http.post("/monitors", json=reporting)).json()["monitor_id"])
        shopping = {"name": "shop", "url": watching.url("/shop"), "every_s": 10, "product": True}
        refused = await http.post("/monitors", json=shopping | {"name": "refused", "watch": ["h1"]})
        assert refused.status_code == 400
        assert "product" in refused.json()["message"]
        created = (await http.post("/monitors", json=shopping)).json()
        shop_id = UUID(created["monitor_id"])
        assert created["product"] is True
        created = (await http.post("/monitors", json=triggered)).json()
        stock_id = UUID(created["monitor_id"])
        assert (created["trigger"], created["drop"], created["insensitive"]) == (
            ["in stock|sold out"],
            ["^visitors today"],
            True,
        )

    async def prices() -> list[CheckRecorded]:
        await recorded(watching, api_id, 1)  # every answer differs in "served": unchanged selection
        await recorded(watching, api_id, 2)
        page.product = page.product | {"price": 34.9}
        return await recorded(watching, api_id, 3)

    async def stock() -> list[CheckRecorded]:
        await recorded(watching, stock_id, 1)
        page.stock = ["Kettle", "Sold out", "Updated 10:05"]  # a change no trigger is about
        await recorded(watching, stock_id, 2)
        page.stock = ["Kettle", "In stock", "Updated 10:10"]
        await recorded(watching, stock_id, 3)
        page.stock = ["KETTLE", "IN   STOCK", "Updated 10:10"]  # only case and spaces
        return await recorded(watching, stock_id, 4)

    async def report() -> list[CheckRecorded]:
        await recorded(watching, report_id, 1)
        page.report = ["Quarterly report", "Revenue: 12 million EUR"]
        return await recorded(watching, report_id, 2)

    async def shop() -> list[CheckRecorded]:
        await recorded(watching, shop_id, 1)
        page.offer = page.offer | {"price": "34.50"}
        await recorded(watching, shop_id, 2)
        page.offer = page.offer | {"availability": "https://schema.org/OutOfStock"}
        await recorded(watching, shop_id, 3)
        page.offer = page.offer | {"availability": "http://schema.org/InStock", "price": 34.5}
        await recorded(watching, shop_id, 4)
        page.offer = page.offer | {"availability": "InStock"}  # the same offer, stated otherwise
        return await recorded(watching, shop_id, 5)

    api_checks, stock_checks, report_checks, shop_checks = await asyncio.gather(
        prices(), stock(), report(), shop()
    )
    assert [check.change for check in shop_checks] == [
        ChangeKind.NEW,
        ChangeKind.CHANGED,
        ChangeKind.CHANGED,
        ChangeKind.CHANGED,
        None,
    ]
    assert [check.change for check in report_checks] == [ChangeKind.NEW, ChangeKind.CHANGED]
    assert [check.change for check in api_checks] == [ChangeKind.NEW, None, ChangeKind.CHANGED]
    assert [check.change for check in stock_checks] == [ChangeKind.NEW, None, ChangeKind.CHANGED, None]
    assert len({check.fingerprint for check in stock_checks[:3]}) == 3  # the second is known, not announced

    await watching.changes.wait_for(
        lambda _: len(changes_of(watching, api_id)) >= 2 and len(changes_of(watching, stock_id)) >= 2
    )
    await watching.changes.wait_for(lambda _: len(changes_of(watching, report_id)) >= 2)
    await watching.changes.wait_for(lambda _: len(changes_of(watching, shop_id)) >= 4)
    new, cheaper, sold_out, back = (change.offer for change in changes_of(watching, shop_id))
    assert new == OfferChange(current=Offer(amount="39.90", currency="EUR", availability="InStock"))
    assert cheaper is not None
    assert cheaper.kinds == (OfferChangeKind.PRICE_CHANGED,)
    assert (cheaper.previous, cheaper.current) == (
        new.current,
        Offer(amount="34.50", currency="EUR", availability="InStock"),
    )
    assert sold_out is not None
    assert sold_out.kinds == (OfferChangeKind.OUT_OF_STOCK,)
    assert back is not None
    assert back.kinds == (OfferChangeKind.BACK_IN_STOCK,)
    assert back.current == Offer(amount="34.50", currency="EUR", availability="InStock")
    assert "-price = 39.90 EUR\n+price = 34.50 EUR" in changes_of(watching, shop_id)[1].diff
    code, shown = await command_line(watching.system, "svc-b", "monitor", "changes", str(shop_id))
    assert code == 0, shown
    assert "PRICE_CHANGED  39.90 EUR InStock -> 34.50 EUR InStock" in shown
    assert "BACK_IN_STOCK  34.50 EUR OutOfStock -> 34.50 EUR InStock" in shown
    code, shown = await command_line(watching.system, "svc-b", "monitor", "get", str(shop_id))
    assert "compares the product's offer (price, stock)" in shown
    revenue = changes_of(watching, report_id)[1]
    assert "-Revenue: 10 million EUR\n+Revenue: 12 million EUR" in revenue.diff
    assert revenue.word_diff == "Revenue: [-10-]{+12+} million EUR"
    price = changes_of(watching, api_id)[1]
    assert "-price = 39.9\n+price = 34.9" in price.diff
    assert "served" not in price.diff
    assert price.word_diff == "price = [-39-]{+34+}.9"
    in_stock = changes_of(watching, stock_id)[1]
    assert "+In stock" in in_stock.diff
    assert "Visitors" not in in_stock.diff
    assert "[-Sold out-]{+In stock+}" in in_stock.word_diff
    async with api(watching.system, "svc-b") as http:
        listed = (await http.get(f"/monitors/{stock_id}/changes")).json()["items"]
        assert listed[0]["word_diff"] == in_stock.word_diff
        one = await http.get(f"/monitors/{stock_id}/changes.atom")
        assert one.headers["content-type"].startswith("application/atom+xml")
        feed = feedparser.parse(one.content)
        assert not feed.bozo, feed.get("bozo_exception")
        assert [item.tags[0].term for item in feed.entries] == ["CHANGED", "NEW"]
        assert "[-Sold out-]{+In stock+}" in feed.entries[0].summary
        mine = feedparser.parse((await http.get("/monitors/changes.atom")).content)
        assert not mine.bozo
        assert {item.title.split(":")[0] for item in mine.entries} == {"api", "stock", "report", "shop"}
        assert len(mine.entries) == 10
        shop_feed = feedparser.parse((await http.get(f"/monitors/{shop_id}/changes.atom")).content)
        assert [item.tags[-1].term for item in shop_feed.entries[:3]] == [
            "BACK_IN_STOCK",
            "OUT_OF_STOCK",
            "PRICE_CHANGED",
        ]
        offers = (await http.get(f"/monitors/{shop_id}/changes")).json()["items"]
        assert offers[2]["offer"] == {
            "kinds": ["PRICE_CHANGED"],
            "previous": {"amount": "39.90", "currency": "EUR", "availability": "InStock"},
            "current": {"amount": "34.50", "currency": "EUR", "availability": "InStock"},
        }
        assert (await http.get("/monitors/changes.atom", params={"caller": "svc-a"})).status_code == 403
    async with api(watching.system, "svc-a") as http:
        assert (await http.get(f"/monitors/{stock_id}/changes.atom")).status_code == 404
        theirs = feedparser.parse((await http.get("/monitors/changes.atom")).content)
        assert {item.title.split(":")[0] for item in theirs.entries}.isdisjoint({"api", "stock", "report"})
    async with api(watching.system, "viewer") as http:
        assert (
            await http.get("/monitors/changes.atom")
        ).status_code == 400  # whose: every caller's is too many
        viewed = feedparser.parse(
            (await http.get("/monitors/changes.atom", params={"caller": "svc-b"})).content
        )
        assert len(viewed.entries) == 10
