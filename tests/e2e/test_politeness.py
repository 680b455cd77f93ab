"""Politeness and policy classes against real loopback origins: per-host limits that hold across
workers, robots.txt obeyed when the class says so, and each class's response limits."""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import pytest_asyncio
from aiohttp import web

from schemas.enums import AttemptOutcome, CacheMode, JobStatus, PolicyClass
from streams.worker import Worker
from tests.e2e.conftest import System, running_system, settled_ownership, worker_settings
from tests.servers import loopback

pytestmark = pytest.mark.asyncio(loop_scope="module")
ROBOTS = "User-agent: *\nDisallow: /private\n"
MIB = 1024 * 1024


@dataclass
class PoliteOrigin:
    """Records when each request arrived and how many ran at once; serves robots.txt when told to."""

    port: int = 0
    arrivals: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    hits: Counter[str] = field(default_factory=Counter)
    running: int = 0
    most_running: int = 0
    robots_status: int = 200

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hits[request.path] += 1
        self.arrivals[request.path.split("/")[1]].append(time.monotonic())
        if request.path == "/robots.txt":
            return web.Response(status=self.robots_status, text=ROBOTS)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if request.path.startswith("/slow/"):
                await asyncio.sleep(0.3)
            if request.path.startswith("/big/"):
                return web.Response(body=b"x" * int(request.path.split("/")[2]))
            return web.Response(text=f"page {request.path}", content_type="text/html")
        finally:
            self.running -= 1


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def polite_origin() -> AsyncIterator[PoliteOrigin]:
    server = PoliteOrigin()
    async with loopback(server.handle) as server.port:
        yield server


async def all_succeed(system: System, job_ids: list[object]) -> None:
    for job_id in job_ids:
        assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED


def most_within(arrivals: list[float], window_s: float) -> int:
    """The most requests that arrived within any window of `window_s` seconds."""
    ordered = sorted(arrivals)
    return max(sum(1 for at in ordered[i:] if at < start + window_s) for i, start in enumerate(ordered))


async def test_a_host_rate_limit_holds_across_two_workers_at_the_origin(broker, polite_origin, tmp_path):
    settings = worker_settings(
        broker.bootstrap, tmp_path / "a", partitions=4, host_limits={"127.0.0.1": {"requests_per_s": 3}}
    )
    async with running_system(settings) as system:
        second = Worker(settings.model_copy(update={"data_dir": tmp_path / "b"}))
        await second.start()
        try:
            assert system.worker is not None
            owned = await settled_ownership(system.worker, second)
            assert owned[0]
            assert owned[1]
            jobs = [
                await system.submit(polite_origin.url(f"/rated/{n}"), cache_mode=CacheMode.BYPASS)
                for n in range(12)
            ]
            await all_succeed(system, jobs)
        finally:
            await second.stop()
    arrivals = polite_origin.arrivals["rated"]
    assert len(arrivals) == 12
    # Three per second: arrivals stay three in any 0.9 s (the margin is the loopback's jitter).
    assert most_within(arrivals, 0.9) <= 3


async def test_a_host_concurrency_limit_holds_at_the_origin(broker, polite_origin, tmp_path):
    settings = worker_settings(broker.bootstrap, tmp_path, executor_concurrency=8, host_concurrency=2)
    async with running_system(settings) as system:
        jobs = [
            await system.submit(polite_origin.url(f"/slow/{n}"), cache_mode=CacheMode.BYPASS)
            for n in range(8)
        ]
        await all_succeed(system, jobs)
    assert polite_origin.most_running == 2


async def test_robots_txt_refuses_a_disallowed_url_for_a_strict_job_and_is_read_once(
    broker, polite_origin, tmp_path
):
    settings = worker_settings(broker.bootstrap, tmp_path)
    async with running_system(settings) as system:
        strict = {"policy_class": PolicyClass.STRICT, "cache_mode": CacheMode.BYPASS}
        refused = await system.submit(polite_origin.url("/private/report"), **strict)
        allowed = await system.submit(polite_origin.url("/public/report"), **strict)
        standard = await system.submit(polite_origin.url("/private/standard"), cache_mode=CacheMode.BYPASS)
        completion = await system.completion(refused)
        assert completion.status is JobStatus.DEAD_LETTER
        assert completion.failure.code == "ROBOTS_DISALLOWED"
        (attempt,) = await system.attempts_seen(refused)
        assert attempt.outcome is AttemptOutcome.DENIED
        assert attempt.cost.actual == 0
        await all_succeed(system, [allowed, standard])  # STANDARD does not read robots.txt
    assert polite_origin.hits["/private/report"] == 0
    assert polite_origin.hits["/robots.txt"] == 1


async def test_an_unreadable_robots_txt_defers_a_strict_job_without_charging_it(broker, tmp_path):
    origin = PoliteOrigin(robots_status=503)
    async with loopback(origin.handle) as origin.port:
        settings = worker_settings(broker.bootstrap, tmp_path)
        async with running_system(settings) as system:
            job = await system.submit(origin.url("/public/later"), policy_class=PolicyClass.STRICT)

            await system.attempts_seen(job)
            await asyncio.sleep(1.0)  # the retry backoff of the test settings is 300 ms
            attempts = await system.attempts_seen(job)
            assert {a.failure.code for a in attempts} == {"ROBOTS_UNAVAILABLE"}
            assert not system.completions.of_job(job)
    assert origin.hits["/public/later"] == 0
    assert origin.hits["/robots.txt"] == 1  # the failure is kept for a while, not asked again


async def test_a_large_job_is_not_capped_like_a_standard_one(broker, polite_origin, tmp_path):
    settings = worker_settings(broker.bootstrap, tmp_path)
    size = 11 * MIB  # over STANDARD's 10 MiB, under LARGE's 100 MiB
    async with running_system(settings) as system:
        standard = await system.submit(polite_origin.url(f"/big/{size}"), cache_mode=CacheMode.BYPASS)
        large = await system.submit(
            polite_origin.url(f"/big/{size}"), policy_class=PolicyClass.LARGE, caller_identity="svc-large"
        )
        capped = await system.completion(standard)
        assert capped.status is JobStatus.DEAD_LETTER
        assert capped.failure.code == "BODY_TOO_LARGE"
        fetched = await system.completion(large)
        assert fetched.status is JobStatus.SUCCEEDED
        assert [artifact.size_bytes for artifact in fetched.artifacts] == [size]
