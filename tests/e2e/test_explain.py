"""`GET /jobs/{id}/explain` and `scrapestream explain` tell why a job is where it is."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from schemas.events import RetryScheduled
from tests.commands import run
from tests.e2e.conftest import Origin, System, running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(broker, tmp_path_factory) -> AsyncIterator[System]:
    async with running_system(
        worker_settings(broker.bootstrap, tmp_path_factory.mktemp("explain"))
    ) as running:
        yield running


async def test_a_retry_after_a_503_and_an_answer_from_a_later_jobs_cache_entry_are_both_named(
    system: System, origin: Origin, tmp_path
):
    assert system.worker is not None
    url = origin.url("/busy/explain")
    waited = await system.submit(url)  # 503 with Retry-After: 3
    await system.events.wait_for(
        lambda events: any(isinstance(e, RetryScheduled) and e.job_id == waited for e in events)
    )
    later = await system.submit(url, idempotency_key="a-later-submission")  # fetches, and is cached
    assert (await system.completion(later)).status.value == "SUCCEEDED"
    completion = await system.completion(waited)
    assert completion.status.value == "SUCCEEDED"
    assert completion.from_cache

    base = f"http://127.0.0.1:{system.worker.web_port}"
    async with httpx.AsyncClient(base_url=base) as http:
        told = (await http.get(f"/jobs/{waited}/explain")).json()
    rules = [step["rule"] for step in told["steps"]]
    deciding = [
        rule for rule in rules if rule not in ("attempt.dispatched", "attempt.started", "attempt.waited")
    ]
    assert deciding[:3] == ["submission.accepted", "attempt.failed", "retry.retry_after"]
    assert rules[1] == "attempt.dispatched"  # handed to the executors first
    assert rules[-2:] == ["cache.answered", "job.succeeded"]
    retry = next(step["said"] for step in told["steps"] if step["rule"] == "retry.retry_after")
    assert "HTTP_503" in retry
    assert "Retry-After asked to wait until" in retry
    cached = next(step["said"] for step in told["steps"] if step["rule"] == "cache.answered")
    assert f"by job {later}" in cached
    assert told["why"].startswith("it is SUCCEEDED because succeeded with attempt 2")

    code, output = await run("explain", str(waited)[:13], "--url", base, cwd=tmp_path)
    assert code == 0, output
    assert "retry.retry_after: retried because of HTTP_503" in output
    assert "cache.answered: attempt 2 was answered from the cache" in output
