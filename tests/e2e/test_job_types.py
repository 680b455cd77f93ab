"""Job types from a plugin package, found through the `scrapestream.job_types` entry points."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest

from schemas.enums import JobStatus
from schemas.events import AttemptRecorded
from tests.e2e.conftest import System, running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")
PLUGINS = Path(__file__).parent.parent / "plugins"  # a package and its dist-info, as pip installs one


@pytest.fixture
def installed_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))


def attempts_of(system: System, job_id: UUID) -> list[Any]:
    return [e.attempt for e in system.events.of_job(job_id) if isinstance(e, AttemptRecorded)]


async def test_a_plugin_job_type_runs_end_to_end_and_is_listed_with_its_profile(
    broker, origin, tmp_path, installed_plugin, caplog
):
    caplog.set_level(logging.WARNING)
    settings = worker_settings(broker.bootstrap, tmp_path)
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        assert sorted(worker.job_types) == ["test.broken-profile", "test.echo", "test.plain", "test.refusing"]
        url = origin.url("/page/echoed")
        job = await system.submit(url, job_type="test.echo")
        completion = await system.completion(job)
        assert completion.status is JobStatus.SUCCEEDED
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
            (artifact,) = completion.artifacts
            stored = await http.get(f"/artifacts/{artifact.artifact_id}")
            assert stored.content == f"echo {url}".encode()
            listed = (await http.get("/job-types")).json()["items"]
        assert origin.hits["/page/echoed"] == 0  # the plugin made no request
        plain = await system.submit(origin.url("/page/plain"), job_type="test.plain")
        assert (await system.completion(plain)).status is JobStatus.SUCCEEDED
    by_name = {item["name"]: item for item in listed}
    assert by_name["test.echo"] == {
        "name": "test.echo",
        "label": "Echo the URL back",
        "max_runtime_ms": 5_000,
        "max_attempts": 2,
        "declared": True,
    }
    for defaulted in ("test.broken-profile", "test.plain"):
        item = by_name[defaulted]
        assert (item["max_runtime_ms"], item["max_attempts"], item["declared"]) == (30_000, 3, False)
    assert by_name["http.fetch"]["declared"]
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert sum("test.broken-profile" in message for message in warnings) == 1
    assert any("scrapestream_echo:Nameless" in message for message in warnings)
    assert any("scrapestream_echo:DoesNotExist" in message for message in warnings)


async def test_a_one_attempt_job_type_is_not_retried_after_a_retryable_failure(
    broker, origin, tmp_path, installed_plugin
):
    settings = worker_settings(broker.bootstrap, tmp_path)
    async with running_system(settings) as system:
        job = await system.submit(origin.url("/page/refused"), job_type="test.refusing")
        completion = await system.completion(job)
        assert completion.status is JobStatus.DEAD_LETTER
        assert completion.failure.code == "TEST_REFUSED"
        await system.events.wait_for(
            lambda _: any(isinstance(e, AttemptRecorded) for e in system.events.of_job(job))
        )
        assert len(attempts_of(system, job)) == 1


async def test_without_the_plugin_its_job_type_is_unknown_and_refused_at_submit(broker, origin, tmp_path):
    settings = worker_settings(broker.bootstrap, tmp_path)
    async with running_system(settings) as system:
        job = await system.submit(origin.url("/page/no-plugin"), job_type="test.echo")
        completion = await system.completion(job)
        assert completion.status is JobStatus.REJECTED
        assert completion.failure.code == "UNKNOWN_JOB_TYPE"
