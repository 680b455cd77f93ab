"""Routes and budgets end to end: reservations on the route ledger, denials, proxies, `GET /routes`."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID, uuid4

import httpx
import pproxy  # type: ignore[import-untyped]
import pytest
import pytest_asyncio

from schemas.enums import (
    ArtifactTrust,
    AttemptOutcome,
    CacheMode,
    JobStatus,
    TransportPolicy,
    TransportRoute,
)
from schemas.events import JobSucceeded
from schemas.work import RouteReconciled, RouteReserved
from streams.clock import utc_now
from streams.runtime.publisher import Outgoing, Publisher, outgoing, partition_of
from streams.runtime.topics import ensure_topics
from streams.worker import Worker
from tests.commands import run
from tests.e2e.conftest import Observer, Origin, System, running_system, settled_ownership, worker_settings
from tests.servers import loopback

pytestmark = pytest.mark.asyncio(loop_scope="module")
PAGE_BYTES = 1_000
PRICE_PER_GB = Decimal(1_000_000)  # a thousandth per byte: the 2,000-byte cap is reserved at 2
BUDGET = Decimal("2.5")  # one 1,000-byte page a period: its estimate and a second one's do not fit


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def second_origin() -> AsyncIterator[Origin]:
    """The same origin on 127.0.0.2, whose due work goes to the other partition than 127.0.0.1's."""
    server = Origin(host="127.0.0.2")
    async with loopback(server.handle, server.host) as server.port:
        yield server


@contextlib.asynccontextmanager
async def proxy_server() -> AsyncIterator[tuple[str, list[str]]]:
    """A real HTTP forwarding proxy on loopback (pproxy); yields its URL and its connection log."""
    log: list[str] = []
    server = await pproxy.Server("http://127.0.0.1:0").start_server({"rserver": [], "verbose": log.append})
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", log
    finally:
        server.close()
        await server.wait_closed()


@pytest_asyncio.fixture(loop_scope="module")
async def forwarding_proxy() -> AsyncIterator[tuple[str, list[str]]]:
    async with proxy_server() as proxy:
        yield proxy


def price(wire_bytes: int) -> Decimal:
    return Decimal(wire_bytes) / 1000


async def attempts_until_done(system: System, jobs: list[UUID]) -> dict[UUID, list[Any]]:
    await system.events.wait_for(
        lambda events: {e.job_id for e in events if isinstance(e, JobSucceeded)} >= set(jobs), timeout_s=120
    )
    return {job: system.attempts(job) for job in jobs}


async def routes_of(worker: Worker) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
        return {item["name"]: item for item in (await http.get("/routes")).json()["items"]}


async def route_when(worker: Worker, name: str, condition: Any) -> dict[str, Any]:
    """The route as `GET /routes` shows it once `condition` holds (the ledger is read asynchronously)."""
    async with asyncio.timeout(30):
        while not condition(route := (await routes_of(worker))[name]):  # noqa: ASYNC110 - another task reads it
            await asyncio.sleep(0.1)
    return route


async def test_a_tiny_budget_denies_at_no_cost_runs_next_period_and_two_workers_never_overspend(
    broker, origin, second_origin, tmp_path
):
    route = {"kind": "direct", "price_per_gb": str(PRICE_PER_GB), "budget": str(BUDGET), "period_s": 3}
    settings = worker_settings(
        broker.bootstrap,
        tmp_path / "a",
        routes={"direct": route},
        policy_classes={"STANDARD": {"max_body_bytes": 2_000}},
    )
    async with running_system(settings) as system:
        second = Worker(settings.model_copy(update={"data_dir": tmp_path / "b"}))
        await second.start()
        try:
            assert system.worker is not None
            owned = await settled_ownership(system.worker, second, partitions=2)
            assert owned[0]
            assert owned[1]
            jobs = [
                await system.submit(server.url(f"/bytes/{PAGE_BYTES}/{n}"), cache_mode=CacheMode.BYPASS)
                for n in range(2)
                for server in (origin, second_origin)
            ]
            attempts = await attempts_until_done(system, jobs)
            total = sum((a.cost.actual for tried in attempts.values() for a in tried), Decimal(0))
            seen = [
                await route_when(worker, "direct", lambda r: Decimal(r["spent_total"]) == total)
                for worker in (system.worker, second)
            ]
        finally:
            await second.stop()
    every = [attempt for tried in attempts.values() for attempt in tried]
    fetched = [a for a in every if a.outcome is AttemptOutcome.FETCHED]
    denied = [a for a in every if a.outcome is AttemptOutcome.DENIED]
    assert len(fetched) == 4
    assert all(a.route_name == "direct" for a in fetched)
    # Charged for every byte that crossed the wire: the page, its status line and headers.
    assert all(a.bytes > PAGE_BYTES for a in fetched)
    assert all((a.cost.estimated, a.cost.actual) == (Decimal(2), price(a.bytes)) for a in fetched)
    assert len(denied) >= 3  # the first period could take one of the four
    for attempt in denied:
        assert attempt.failure.code == "BUDGET_EXHAUSTED"
        assert (attempt.route_name, attempt.route) == ("direct", TransportRoute.DIRECT)  # the one that denied
        assert attempt.failure.retry_at is not None
        assert (attempt.cost.estimated, attempt.cost.actual, attempt.bytes) == (0, 0, 0)
    assert total == sum((price(a.bytes) for a in fetched), Decimal(0))
    for shown in seen:  # both workers' ledgers agree, and no period went past the budget
        assert shown["granted"] == 4
        assert shown["denied"] == len(denied)
        spent = [Decimal(period["spent"]) for period in shown["periods"]]
        assert all(amount <= BUDGET for amount in spent)
        assert len([amount for amount in spent if amount]) == 4
    assert seen[0]["periods"] == seen[1]["periods"]


async def test_a_proxy_route_carries_the_request_and_marks_its_attempts(
    broker, origin, second_origin, forwarding_proxy, tmp_path
):
    proxy_url, proxy_log = forwarding_proxy
    settings = worker_settings(
        broker.bootstrap,
        tmp_path,
        routes={"pool": {"kind": "proxy", "proxy_urls": [proxy_url]}},
        allow_private_networks=False,
        allowed_networks=["127.0.0.1/32"],
    )
    async with running_system(settings) as system:
        url = origin.url(f"/page/proxied-{broker.kind}")  # the origin is shared by both brokers' runs
        job = await system.submit(url, transport_policy=TransportPolicy.PROXY_ALLOWED)
        again = await system.submit(
            url, transport_policy=TransportPolicy.PROXY_ALLOWED, idempotency_key="again"
        )
        refused = await system.submit(
            second_origin.url(f"/page/private-{broker.kind}"), transport_policy=TransportPolicy.PROXY_ALLOWED
        )
        direct = await system.submit(origin.url(f"/page/direct-{broker.kind}"))
        every = (job, again, refused, direct)
        completions = {j: await system.completion(j) for j in every}
        await system.events.wait_for(  # the observer may trail the completions
            lambda _: all(system.attempts(j) for j in every)
        )
        attempts = {j: system.attempts(j) for j in every}
    assert completions[job].status is JobStatus.SUCCEEDED
    assert completions[job].artifacts_trust is ArtifactTrust.UNTRUSTED  # what the caller is told
    assert completions[direct].artifacts_trust is ArtifactTrust.VERIFIED
    (through,) = attempts[job]
    assert (through.route, through.route_name, through.trust) == (
        TransportRoute.PROXY,
        "pool",
        ArtifactTrust.UNTRUSTED,
    )
    assert any(f"-> 127.0.0.1:{origin.port}" in line for line in proxy_log)
    (second,) = attempts[again]
    assert not second.from_cache  # an untrusted answer is not served to another job from the cache
    assert origin.hits[f"/page/proxied-{broker.kind}"] == 2
    assert completions[refused].failure.code == "ADDRESS_REFUSED"  # checked before the proxy is asked
    assert not any(f"127.0.0.2:{second_origin.port}" in line for line in proxy_log)
    assert completions[direct].status is JobStatus.DEAD_LETTER  # no direct route is configured
    assert completions[direct].failure.code == "ROUTE_NOT_ALLOWED"
    (denied,) = attempts[direct]
    assert denied.outcome is AttemptOutcome.DENIED
    assert denied.cost.actual == 0


async def test_a_job_blocked_on_the_direct_route_is_retried_through_the_pool(
    broker, origin, forwarding_proxy, tmp_path
):
    proxy_url, proxy_log = forwarding_proxy
    routes = {"direct": {"kind": "direct"}, "pool": {"kind": "proxy", "proxy_urls": [proxy_url]}}
    settings = worker_settings(broker.bootstrap, tmp_path, routes=routes)
    async with running_system(settings) as system:
        escalated = await system.submit(
            origin.url(f"/blockedonce/escalated-{broker.kind}"),
            transport_policy=TransportPolicy.PROXY_ALLOWED,
        )
        direct_only = await system.submit(origin.url(f"/blockedonce/direct-only-{broker.kind}"))
        attempts = {job: await attempts_after_completion(system, job) for job in (escalated, direct_only)}
    first, second = attempts[escalated]
    assert (first.route_name, first.failure.code) == ("direct", "HTTP_403")
    assert (second.route_name, second.outcome, second.failure) == ("pool", AttemptOutcome.FETCHED, None)
    assert any(f"-> 127.0.0.1:{origin.port}" in line for line in proxy_log)
    (only,) = attempts[direct_only]  # no other route for it: the 403 ends it
    assert (only.route_name, only.failure.code) == ("direct", "HTTP_403")


async def test_a_pool_with_request_affinity_takes_one_url_through_one_proxy(broker, origin, tmp_path):
    async with proxy_server() as (first_url, first_log), proxy_server() as (second_url, second_log):
        pool = {"kind": "proxy", "proxy_urls": [first_url, second_url], "affinity": "request"}
        settings = worker_settings(broker.bootstrap, tmp_path, routes={"pool": pool})
        async with running_system(settings) as system:
            for n in range(6):
                job = await system.submit(
                    origin.url(f"/page/pinned-{broker.kind}"),
                    transport_policy=TransportPolicy.PROXY_ALLOWED,
                    cache_mode=CacheMode.BYPASS,
                    idempotency_key=f"pinned-{n}",
                )
                assert (await system.completion(job)).status is JobStatus.SUCCEEDED
    assert origin.hits[f"/page/pinned-{broker.kind}"] == 6
    used = [log for log in (first_log, second_log) if any(str(origin.port) in line for line in log)]
    assert len(used) == 1  # spread by job, six jobs would have used both


async def attempts_after_completion(system: System, job: UUID) -> list[Any]:
    await system.completion(job)
    ended = {"JobSucceeded", "JobDeadLettered"}
    await system.events.wait_for(lambda _: bool(ended & set(system.event_kinds(job))))
    return system.attempts(job)


async def test_a_route_rate_limit_denies_past_the_rate_and_every_job_still_runs(broker, origin, tmp_path):
    settings = worker_settings(
        broker.bootstrap, tmp_path, routes={"direct": {"kind": "direct", "requests_per_s": 2}}
    )
    async with running_system(settings) as system:
        jobs = [
            await system.submit(origin.url(f"/page/rated-route/{n}"), cache_mode=CacheMode.BYPASS)
            for n in range(6)
        ]
        attempts = await attempts_until_done(system, jobs)
        assert system.worker is not None
        shown = await route_when(system.worker, "direct", lambda r: r["granted"] == 6)
    every = [attempt for tried in attempts.values() for attempt in tried]
    denied = [a for a in every if a.outcome is AttemptOutcome.DENIED]
    assert len(every) - len(denied) == 6
    assert denied  # six at once cannot all start within one second at two per second
    assert {a.failure.code for a in denied} == {"RATE_LIMITED"}
    assert all(a.failure.retry_at is not None and a.cost.actual == 0 for a in denied)
    assert shown["denied"] == len(denied)
    assert shown["spent_total"] == "0.000000"  # a rate limit alone charges nothing


@pytest.mark.parametrize(
    ("path", "code"),
    [("/stream/400000/charged", "BODY_TOO_LARGE"), ("/trickle/charged", "TIMEOUT")],
)
async def test_a_failed_fetch_is_charged_for_every_byte_it_carried(broker, origin, tmp_path, path, code):
    route = {"kind": "direct", "price_per_gb": str(PRICE_PER_GB), "budget": "1000", "period_s": 3600}
    settings = worker_settings(
        broker.bootstrap,
        tmp_path,
        routes={"direct": route},
        policy_classes={"STANDARD": {"max_body_bytes": 100_000, "timeout_s": 1.5}},
        profiles={"http.fetch": (8_000, 1)},
    )
    async with running_system(settings) as system:
        job_id = await system.submit(origin.url(path), cache_mode=CacheMode.BYPASS)
        completion = await system.completion(job_id)
        assert completion.failure.code == code
        (attempt,) = await system.attempts_seen(job_id)
        assert attempt.bytes > 1_000  # what the origin sent before the cap or the clock stopped it
        assert attempt.cost.actual == min(price(attempt.bytes), attempt.cost.estimated)
        assert system.worker is not None
        # The reservation counts its estimate until its settlement is read: wait for that.
        shown = await route_when(
            system.worker, "direct", lambda r: r["granted"] == 1 and r["reservations_outstanding"] == 0
        )
    assert Decimal(shown["spent_total"]) == attempt.cost.actual
    assert Decimal(shown["spent_total"]) <= Decimal(100)  # never past what was reserved: the cap's price


async def test_route_ledger_records_no_writer_could_mean_are_skipped_and_the_ledger_keeps_deciding(
    broker, origin, tmp_path
):
    route = {"kind": "direct", "price_per_gb": str(PRICE_PER_GB), "budget": "1000000", "period_s": 3600}
    settings = worker_settings(broker.bootstrap, tmp_path, routes={"direct": route})
    poison = [
        RouteReserved(
            reservation_id=uuid4(),
            route="direct",
            job_id=uuid4(),
            attempt_number=1,
            estimated=Decimal(1),
            requested_at=datetime(1, 1, 1, tzinfo=UTC),
        ),
        RouteReserved(
            reservation_id=uuid4(),
            route="direct",
            job_id=uuid4(),
            attempt_number=1,
            estimated=Decimal(-1000),
            requested_at=utc_now(),
        ),
        RouteReconciled(
            reservation_id=uuid4(),
            route="direct",
            actual=Decimal(-5),
            bytes=-1,
            browser_seconds=Decimal(0),
            reconciled_at=utc_now(),
        ),
    ]
    publisher = Publisher(broker.access, broker.profile)
    await publisher.start()
    try:
        topic = settings.topic("routes")
        await ensure_topics(settings, {"http.fetch"})
        messages = [outgoing(topic, "direct", record) for record in poison]
        await publisher.send_all([*messages, Outgoing(topic, b"direct", b"\xc3\x01not avro")])
    finally:
        await publisher.stop()
    async with running_system(settings) as system:
        job_id = await system.submit(origin.url("/page/after-poison"), cache_mode=CacheMode.BYPASS)
        assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED
        worker = system.worker
        assert worker is not None
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
            ready = await http.get("/readyz")
            counters = (await http.get("/healthz")).json()["counters"]
        assert ready.status_code == 200, ready.text
        assert counters["route_ledger.skipped"] == 4
        shown = await route_when(worker, "direct", lambda r: r["granted"] == 1)
        assert Decimal(shown["spent_total"]) > 0
        # A restarted worker reads the same records and starts just the same.
        await worker.stop()
        system.worker = again = Worker(settings.model_copy(update={"data_dir": tmp_path / "again"}))
        await again.start()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{again.web_port}") as http:
            assert (await http.get("/healthz")).json()["counters"]["route_ledger.skipped"] == 4


async def test_a_dead_background_task_fails_readiness_loudly_and_a_stopping_worker_says_so(
    broker, tmp_path, caplog
):
    settings = worker_settings(broker.bootstrap, tmp_path)
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        assert worker.table is not None
        assert worker.table.task is not None
        worker.table.task.cancel()  # as if it had died
        await asyncio.sleep(0)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
            answer = await http.get("/readyz")
            worker.watchdog.stopping()  # the first step of `stop`: its clients stop while the port answers
            stopping = await http.get("/readyz")
    assert answer.status_code == 503
    assert any("the global table reader stopped" in reason for reason in answer.json()["reasons"])
    assert "background task the global table reader stopped" in caplog.text
    assert stopping.status_code == 503
    assert stopping.json()["reasons"][0] == "the worker is stopping"
    assert stopping.json()["broker_reachable"] is False  # not asked of a producer that may be stopped


async def test_a_routes_ledger_as_of_a_time_is_what_get_routes_showed_then(broker, origin, tmp_path):
    route = {"kind": "direct", "price_per_gb": str(PRICE_PER_GB), "budget": "1000000", "period_s": 86_400}
    settings = worker_settings(broker.bootstrap, tmp_path, routes={"direct": route})
    async with running_system(settings) as system:
        assert system.worker is not None
        first = await system.submit(origin.url("/page/as-of-first"), cache_mode=CacheMode.BYPASS)
        await system.completion(first)
        then = await route_when(system.worker, "direct", lambda r: r["granted"] == 1 and r["rate"] == 0)
        moment = utc_now()
        await asyncio.sleep(1.2)  # what is written next is written at a later millisecond
        later = await system.submit(origin.url("/page/as-of-later"), cache_mode=CacheMode.BYPASS)
        await system.completion(later)
        now = await route_when(system.worker, "direct", lambda r: r["granted"] == 2)
        assert Decimal(now["spent_total"]) > Decimal(then["spent_total"])
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
            (told,) = (await http.get("/routes", params={"as_of": moment.isoformat()})).json()["items"]
            for name in ("spent_total", "spent_in_period", "remaining", "granted", "denied", "periods"):
                assert told[name] == then[name], name
            answer = await http.get("/routes", params={"as_of": (utc_now() + timedelta(hours=1)).isoformat()})
            assert answer.status_code == 422
            assert "in the future" in answer.json()["message"]
        base = str(http.base_url)
        asked = ("routes", "--as-of", moment.isoformat(), "--url", base, "--json")
        code, output = await run(*asked, cwd=tmp_path)
        assert code == 0, output
        assert json.loads(output)["items"][0]["spent_in_period"] == then["spent_in_period"]


async def test_an_as_of_read_starts_from_a_kept_checkpoint_is_bounded_and_one_at_a_time(
    broker, origin, tmp_path
):
    """A long route log, read as of a time by a principal that asks twice at once."""
    route = {"kind": "direct", "price_per_gb": str(PRICE_PER_GB), "budget": "1000000", "period_s": 86_400}
    settings = worker_settings(broker.bootstrap, tmp_path, routes={"direct": route}, as_of_max_records=10_000)
    await ensure_topics(settings, {"http.fetch"})
    topic = settings.topic("routes")
    reservations = [
        RouteReserved(
            reservation_id=uuid4(),
            route="direct",
            job_id=uuid4(),
            attempt_number=1,
            estimated=Decimal("0.000001"),
            requested_at=utc_now(),
        )
        for _ in range(12_000)
    ]
    publisher = Publisher(broker.access, broker.profile)
    await publisher.start()
    try:
        into = partition_of(b"direct", settings.partitions)  # as executors write them: the route's partition
        await publisher.send_all(
            [outgoing(topic, f"direct/{r.reservation_id}", r, partition=into) for r in reservations]
        )
    finally:
        await publisher.stop()
    before_any_checkpoint = utc_now()
    await asyncio.sleep(1.1)
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        now = await route_when(worker, "direct", lambda r: r["granted"] == 12_000)
        assert worker.ledger is not None
        async with asyncio.timeout(30):
            while not worker.ledger.kept["direct"]:  # noqa: ASYNC110 - the reader writes and reads it back
                await asyncio.sleep(0.1)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}", timeout=60) as http:
            told = await http.get("/routes", params={"as_of": utc_now().isoformat()})
            assert told.status_code == 200, told.text
            assert told.json()["items"][0]["granted"] == now["granted"]  # from the checkpoint on
            far = await http.get("/routes", params={"as_of": before_any_checkpoint.isoformat()})
            assert far.status_code == 422
            assert "SCRAPESTREAM_AS_OF_MAX_RECORDS" in far.json()["message"]
            twice = await asyncio.gather(
                *(http.get("/routes", params={"as_of": utc_now().isoformat()}) for _ in range(2))
            )
            assert sorted(answer.status_code for answer in twice) == [200, 429]
            assert (await http.get("/healthz")).status_code == 200


@pytest.mark.timeout(300)  # a worker stopped and started again, and its lapsed leases dispatched anew
async def test_a_stopping_worker_gives_back_a_reservation_whose_call_never_began(broker, tmp_path):
    held, other = Origin(), Origin(host="127.0.0.2")
    route = {"kind": "direct", "price_per_gb": str(PRICE_PER_GB)}
    async with loopback(held.handle) as held.port, loopback(other.handle, other.host) as other.port:
        settings = worker_settings(
            broker.bootstrap,
            tmp_path,
            routes={"direct": route},
            executor_concurrency=1,  # the held page's fetch takes the one place; the other job waits
            profiles={"http.fetch": (3_000, 5)},
            lease_grace_ms=1_000,
            shutdown_grace_s=0.1,
        )
        async with running_system(settings) as system:
            ledger = await Observer(settings.kafka_access, settings.topic("routes")).start()
            try:
                begun = await system.submit(held.url("/slow/begun"), cache_mode=CacheMode.BYPASS)
                await system.events.wait_for(lambda _: "AttemptStarted" in system.event_kinds(begun))
                waiting = await system.submit(other.url("/page/waiting"), cache_mode=CacheMode.BYPASS)

                def reservations() -> list[RouteReserved]:
                    return [r for r in ledger.records if isinstance(r, RouteReserved) and r.job_id == waiting]

                await ledger.wait_for(lambda _: bool(reservations()))
                assert system.worker is not None
                await system.worker.stop()
                (reserved,) = reservations()
                await ledger.wait_for(lambda records: bool(reconciled(records, reserved.reservation_id)))
                held.release.set()
                system.worker = Worker(settings)
                await system.worker.start()
                for job in (begun, waiting):
                    assert (await system.completion(job)).status is JobStatus.SUCCEEDED
            finally:
                await ledger.stop()
    (released,) = reconciled(ledger.records, reserved.reservation_id)
    assert (released.actual, released.bytes) == (0, 0)  # it carried nothing: nothing charged
    first, *_ = system.attempts(waiting)
    assert (first.outcome, first.failure.code) == (AttemptOutcome.DENIED, "WORKER_STOPPED")
    assert other.hits["/page/waiting"] == 1  # requested once, by the next worker


def reconciled(records: list[Any], reservation_id: UUID) -> list[RouteReconciled]:
    return [r for r in records if isinstance(r, RouteReconciled) and r.reservation_id == reservation_id]
