"""Reads as of a time: what `GET /jobs/{id}` answers for a past moment is what it answered then."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
import pytest_asyncio

from streams.clock import utc_now
from tests.commands import run
from tests.e2e.conftest import Origin, System, running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(broker, tmp_path_factory) -> AsyncIterator[System]:
    settings = worker_settings(broker.bootstrap, tmp_path_factory.mktemp("as-of"), retry_base_ms=400)
    async with running_system(settings) as running:
        yield running


async def test_a_job_as_of_each_moment_is_what_the_api_answered_then(
    system: System, origin: Origin, tmp_path
):
    assert system.worker is not None
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        job_id = await system.submit(origin.url("/flaky/as-of"))  # 503 once, then 200
        seen: dict[int, dict] = {}  # each view the API answered, by its sequence
        for _ in range(1_000):
            answer = await http.get(f"/jobs/{job_id}")
            if answer.status_code == 200:
                view = answer.json()
                seen.setdefault(view["sequence"], view)
                if view["state"] == "SUCCEEDED":
                    break
            await asyncio.sleep(0.01)
        events = (await http.get(f"/jobs/{job_id}/events")).json()["items"]
        states = {view["state"] for view in seen.values()}
        assert {"RETRY_WAIT", "SUCCEEDED"} <= states, states
        compared = 0
        for sequence, view in seen.items():
            at = events[sequence - 1]["occurred_at"]
            if sequence < len(events) and events[sequence]["occurred_at"] == at:
                continue  # a later event at the same millisecond: that moment shows both
            then = await http.get(f"/jobs/{job_id}", params={"as_of": at})
            assert then.status_code == 200, then.text
            assert then.json() == view
            until = (await http.get(f"/jobs/{job_id}/events", params={"until": at})).json()["items"]
            assert until == events[:sequence]
            compared += 1
        assert compared >= 2

        at = events[-1]["occurred_at"]
        code, output = await run(
            "get", str(job_id), "--as-of", at, "--url", str(http.base_url), "--json", cwd=tmp_path
        )
        assert code == 0, output
        assert json.loads(output) == (await http.get(f"/jobs/{job_id}", params={"as_of": at})).json()
        future = (utc_now() + timedelta(minutes=5)).isoformat()
        answer = await http.get(f"/jobs/{job_id}", params={"as_of": future})
        assert answer.status_code == 422
        assert "in the future" in answer.json()["message"]
        before = (utc_now() - timedelta(days=1)).isoformat()
        answer = await http.get(f"/jobs/{job_id}/events", params={"until": before})
        assert answer.status_code == 422
        assert f"kept from {events[0]['occurred_at'][:19]}" in answer.json()["message"]
