"""Job types from a plugin package, found through the `scrapestream.job_types` entry points."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest

from schemas.enums import ActorRole, ExpiryReason, JobStatus, RejectionReason
from schemas.events import AttemptStarted, JobRejected, LeaseExpired, LeaseRenewed
from streams.auth.issue import issue
from streams.clock import utc_now
from streams.readers.fleet import Capabilities
from streams.worker import Worker
from tests.e2e.cluster import answered
from tests.e2e.conftest import Origin, System, running_system, worker_settings
from tests.faults.scenarios import until
from tests.servers import loopback

pytestmark = pytest.mark.asyncio(loop_scope="module")
PLUGINS = Path(__file__).parent.parent / "plugins"  # a package and its dist-info, as pip installs one


@pytest.fixture
def installed_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))


async def test_a_plugin_job_type_runs_end_to_end_and_is_listed_with_its_profile(
    broker, origin, tmp_path, installed_plugin, caplog
):
    caplog.set_level(logging.WARNING)
    settings = worker_settings(broker.bootstrap, tmp_path)
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        assert sorted(worker.job_types) == [
            "test.broken-profile",
            "test.echo",
            "test.keeper",
            "test.plain",
            "test.refusing",
            "test.remote",
            "test.sleeper",
            "test.sleeper-once",
        ]
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
        "runs_here": True,
        "not_run_here_because": None,
        "enabled": True,
        "control": None,
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
        assert len(await system.attempts_seen(job)) == 1


async def test_without_the_plugin_its_job_type_is_unknown_and_refused_at_submit(broker, origin, tmp_path):
    settings = worker_settings(broker.bootstrap, tmp_path)
    async with running_system(settings) as system:
        job = await system.submit(origin.url("/page/no-plugin"), job_type="test.echo")
        completion = await system.completion(job)
        assert completion.status is JobStatus.REJECTED
        assert completion.failure.code == "UNKNOWN_JOB_TYPE"


# The deployment's base lease: 3 s of runtime and 1 s of grace; the sleeper's own: 6 s and 1 s.
LEASES = {"default_max_runtime_ms": 3_000, "lease_grace_ms": 1_000}


def of_kind(system: System, job_id: UUID, kind: type[Any]) -> list[Any]:
    return [event for event in system.events.of_job(job_id) if isinstance(event, kind)]


async def test_a_job_longer_than_the_base_lease_renews_and_runs_exactly_once(
    broker, origin, tmp_path, installed_plugin
):
    from scrapestream_echo import Sleeper

    settings = worker_settings(broker.bootstrap, tmp_path, **LEASES)
    async with running_system(settings) as system:
        url = origin.url("/sleep/5500")  # past the base lease, and past one renewal interval (5 s)
        job = await system.submit(url, job_type="test.sleeper")
        assert (await system.completion(job)).status is JobStatus.SUCCEEDED
        attempts = await system.attempts_seen(job)
        assert of_kind(system, job, LeaseRenewed)
        assert not of_kind(system, job, LeaseExpired)
        assert len(attempts) == 1
    assert Sleeper.runs[url] == 1


async def test_a_type_declared_with_no_runtime_ceiling_runs_past_any_default_one(
    broker, origin, tmp_path, installed_plugin
):
    settings = worker_settings(broker.bootstrap, tmp_path, profiles={"test.sleeper-once": (0, 1)}, **LEASES)
    async with running_system(settings) as system:
        job = await system.submit(origin.url("/sleep/6000"), job_type="test.sleeper-once")
        assert (await system.completion(job)).status is JobStatus.SUCCEEDED
        assert [attempt.failure for attempt in await system.attempts_seen(job)] == [None]
        assert of_kind(system, job, LeaseRenewed)  # its lease renewed while it ran


@pytest.mark.parametrize(
    ("job_type", "status", "runs"),
    [("test.sleeper", JobStatus.SUCCEEDED, 2), ("test.sleeper-once", JobStatus.DEAD_LETTER, 1)],
)
async def test_a_job_whose_executor_is_killed_is_retried_after_its_own_lease_within_its_attempts(
    broker, origin, tmp_path, installed_plugin, job_type, status, runs
):
    from scrapestream_echo import Sleeper

    settings = worker_settings(broker.bootstrap, tmp_path / "first", shutdown_grace_s=0, **LEASES)
    async with running_system(settings) as system:
        first = system.worker
        assert first is not None
        url = origin.url(f"/sleep/{job_type}/60000/once")
        job = await system.submit(url, job_type=job_type)
        await system.events.wait_for(lambda _: bool(of_kind(system, job, AttemptStarted)))
        await first.stop()  # mid-run: no report is ever sent for this attempt
        second = Worker(settings.model_copy(update={"data_dir": tmp_path / "second"}))
        await second.start()
        system.worker = second
        assert (await system.completion(job)).status is status
        (started, *_) = of_kind(system, job, AttemptStarted)
        await system.events.wait_for(lambda _: bool(of_kind(system, job, LeaseExpired)))
        (expired,) = of_kind(system, job, LeaseExpired)
        assert expired.lease_id == started.lease_id
        assert expired.occurred_at >= started.lease_expires_at  # the sleeper's 7 s, not the base 4 s
        assert started.lease_expires_at - started.occurred_at >= timedelta(seconds=7)
    assert Sleeper.runs[url] == runs


async def test_work_of_a_type_no_worker_runs_waits_visibly_and_runs_once_a_worker_that_runs_it_joins(
    broker, origin, tmp_path, monkeypatch
):
    monkeypatch.setattr(
        "streams.readers.fleet.SETTLE_S", 3_600.0
    )  # accepted before the others could be known
    declared = {"http.fetch": (8_000, 3), "test.echo": (1_000, 2)}
    settings = worker_settings(
        broker.bootstrap,
        tmp_path / "a",
        profiles=declared,
        start_window_ms=1_000,
        lease_grace_ms=1_000,
        job_type_labels={"test.echo": "Echo, run on other workers", "test.gone": "Never declared"},
    )
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        assert "test.echo" not in worker.job_types  # this worker has no plugin for it
        job = await system.submit(origin.url("/page/waiting"), job_type="test.echo")
        fetched = await system.submit(origin.url("/page/meanwhile"))
        assert (await system.completion(fetched)).status is JobStatus.SUCCEEDED

        def unstarted() -> list[LeaseExpired]:
            return [e for e in system.events.of_job(job) if isinstance(e, LeaseExpired)]

        await system.events.wait_for(lambda _: len(unstarted()) >= 2, timeout_s=30)
        assert {e.reason for e in unstarted()} == {ExpiryReason.NOT_STARTED}  # uncharged, dispatched again
        assert system.attempts(job) == []
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
            listed = {item["name"]: item for item in (await http.get("/job-types")).json()["items"]}
            shown = (await http.get(f"/jobs/{job}")).json()
        assert listed["test.echo"]["runs_here"] is False
        assert listed["test.echo"]["label"] == "Echo, run on other workers"  # its plugin is elsewhere
        assert "test.gone" not in listed  # a label alone declares no type
        assert listed["http.fetch"]["runs_here"] is True
        assert shown["state"] in {"LEASED", "PENDING", "RETRY_WAIT"}

        monkeypatch.syspath_prepend(str(PLUGINS))
        runner = Worker(settings.model_copy(update={"data_dir": tmp_path / "b"}))
        assert "test.echo" in runner.job_types
        await runner.start()
        try:
            completion = await system.completion(job)
        finally:
            await runner.stop()
    assert completion.status is JobStatus.SUCCEEDED
    assert len(system.attempts(job)) == 1
    assert origin.hits["/page/waiting"] == 0  # the plugin ran it, and only once


async def test_a_type_no_running_worker_runs_is_rejected_at_once_until_a_worker_that_runs_it_joins(
    broker, origin, tmp_path, monkeypatch
):
    monkeypatch.setattr("streams.readers.fleet.SETTLE_S", 0.0)
    declared = {"http.fetch": (8_000, 3), "test.echo": (1_000, 2)}
    settings = worker_settings(broker.bootstrap, tmp_path / "a", profiles=declared)
    async with running_system(settings) as system:
        fleet = system.worker.fleet if system.worker else None
        assert fleet is not None
        await until(lambda: fleet.view() is not None)
        job = await system.submit(origin.url("/page/refused-echo"), job_type="test.echo")
        assert (await system.completion(job)).status is JobStatus.REJECTED
        await system.events.wait_for(
            lambda _: any(isinstance(e, JobRejected) for e in system.events.of_job(job))
        )
        (rejected,) = [e for e in system.events.of_job(job) if isinstance(e, JobRejected)]
        assert rejected.reason is RejectionReason.UNSUPPORTED_JOB_TYPE
        said = "no running worker can run 'test.echo': no plugin on this worker provides it"
        assert rejected.detail == said

        monkeypatch.syspath_prepend(str(PLUGINS))
        runner = Worker(settings.model_copy(update={"data_dir": tmp_path / "b", "executor_concurrency": 2}))
        await runner.start()
        try:
            await until(lambda: "test.echo" in (fleet.view() or Capabilities(frozenset(), {})).runs)
            job = await system.submit(origin.url("/page/run-echo"), job_type="test.echo")
            assert (await system.completion(job)).status is JobStatus.SUCCEEDED
        finally:
            await runner.stop()
        await until(lambda: "test.echo" not in (fleet.view() or Capabilities(frozenset(), {})).runs)
        job = await system.submit(origin.url("/page/refused-again"), job_type="test.echo")
        assert (await system.completion(job)).status is JobStatus.REJECTED  # the runner said it left


async def test_a_type_switched_off_at_run_time_rejects_submissions_holds_its_queued_work_and_runs_it_once_on(
    broker, tmp_path
):
    held = Origin()  # its own origin: the test alone releases the slow page
    async with loopback(held.handle) as held.port:
        settings = worker_settings(
            broker.bootstrap,
            tmp_path,
            executor_concurrency=1,  # one fetch place: the queued job waits behind the slow one
            profiles={"http.fetch": (2_000, 3)},
            start_window_ms=1_000,
            lease_grace_ms=1_000,
        )
        async with running_system(settings) as system:
            assert system.worker is not None
            slow = await system.submit(held.url("/slow/holding"))
            await system.events.wait_for(lambda _: bool(of_kind(system, slow, AttemptStarted)))
            queued = await system.submit(held.url("/page/queued"))
            await system.events.wait_for(lambda _: "JobAccepted" in system.event_kinds(queued))
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
                off = await http.post(
                    "/job-types/http.fetch/disable", json={"reason": "the origin asked for a pause"}
                )
                assert off.status_code == 202, off.text
                assert (await http.post("/job-types/nope/disable", json={"reason": "x"})).status_code == 404
                for _ in range(100):
                    listed = {i["name"]: i for i in (await http.get("/job-types")).json()["items"]}
                    if not listed["http.fetch"]["enabled"]:
                        break
                    await asyncio.sleep(0.1)
                assert "the origin asked for a pause" in listed["http.fetch"]["control"]
                refused = await system.completion(await system.submit(held.url("/page/refused")))
                assert (refused.status, refused.failure.code) == (JobStatus.REJECTED, "JOB_TYPE_DISABLED")
                held.release.set()
                assert (await system.completion(slow)).status is JobStatus.SUCCEEDED
                # Its turn came while the type was off: not started, its lease lapses uncharged.
                await system.events.wait_for(lambda _: bool(of_kind(system, queued, LeaseExpired)), 30)
                assert {e.reason for e in of_kind(system, queued, LeaseExpired)} == {ExpiryReason.NOT_STARTED}
                assert held.hits["/page/queued"] == 0
                on = await http.post("/job-types/http.fetch/enable", json={"reason": "pause over"})
                assert on.status_code == 202, on.text
                assert (await system.completion(queued)).status is JobStatus.SUCCEEDED
                audit = (await http.get("/audit", params={"target": "job-type:http.fetch"})).json()["items"]
            assert held.hits["/page/queued"] == 1
            assert (await system.attempts_seen(queued))[-1].attempt_number >= 2  # dispatched again once on
    assert {(a["detail"], a["reason"]) for a in audit} >= {
        ("switched off", "the origin asked for a pause"),
        ("switched on", "pause over"),
    }


async def test_a_type_that_owns_outside_state_vetoes_the_deletion_of_its_histories_audited(
    broker, origin, tmp_path, installed_plugin
):
    settings = worker_settings(broker.bootstrap, tmp_path, history_retention_days=1)
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        assert worker.maintenance is not None
        kept = await system.submit(origin.url("/page/kept"), job_type="test.keeper")
        echoed = await system.submit(origin.url("/page/not-kept"), job_type="test.echo")
        for job in (kept, echoed):
            assert (await system.completion(job)).status is JobStatus.SUCCEEDED
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
            refused = await http.post(f"/jobs/{kept}/delete-history", json={"reason": "tidy up"})
            assert refused.status_code == 409
            assert "the partner's invoice still points at it" in refused.json()["message"]
            swept = await worker.maintenance.run_once(utc_now() + timedelta(days=2))
            assert swept.histories_refused >= 1
            assert (await http.get(f"/jobs/{kept}")).status_code == 200  # kept, by the API and maintenance
            for _ in range(100):
                audit = (await http.get("/audit", params={"target": f"job:{kept}"})).json()["items"]
                if {a["actor_id"] for a in audit} >= {"dev", "scrapestream-maintenance"}:
                    break
                await asyncio.sleep(0.1)
            for _ in range(100):  # a type without a veto has its history purged as before
                if (await http.get(f"/jobs/{echoed}")).status_code == 404:
                    break
                await worker.maintenance.run_once(utc_now() + timedelta(days=2))
                await asyncio.sleep(0.1)
            assert (await http.get(f"/jobs/{echoed}")).status_code == 404
    denied = [a for a in audit if a["outcome"] == "DENIED" and a["action"] == "JOB_HISTORY_DELETE"]
    assert {a["actor_id"] for a in denied} >= {"scrapestream-maintenance"}
    assert all("the partner's invoice still points at it" in a["detail"] for a in denied)


async def test_the_history_veto_is_asked_only_once_the_caller_may_delete_the_history(
    broker, origin, tmp_path, installed_plugin
):
    from scrapestream_echo import Keeper

    roles = {"admin": ActorRole.ADMIN, "operator": ActorRole.OPERATOR, "viewer": ActorRole.VIEWER}
    roles |= {"svc-a": ActorRole.SERVICE, "svc-b": ActorRole.SERVICE}
    issued = {name: issue(name, role) for name, role in roles.items()}
    settings = worker_settings(
        broker.bootstrap,
        tmp_path,
        auth_enabled=True,
        principals=json.dumps({"principals": [entry.entry for entry in issued.values()]}),
        peer_secret="the-peer-secret-of-the-veto-test-0123456789abcdef",
    )
    async with running_system(settings) as system:
        worker = system.worker
        assert worker is not None
        base = f"http://127.0.0.1:{worker.web_port}"

        def as_(name: str) -> httpx.AsyncClient:
            return httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {issued[name].token}"})

        async with as_("svc-a") as owner:
            body = {"url": origin.url("/page/vetoed"), "job_type": "test.keeper", "caller_identity": "svc-a"}
            created = await answered(owner, "POST", "/jobs", json=body)
        kept = created.json()["job_id"]
        assert (await system.completion(UUID(kept))).status is JobStatus.SUCCEEDED
        Keeper.asked.clear()
        for name, status in (("viewer", 403), ("operator", 403), ("svc-b", 404), ("svc-a", 403)):
            async with as_(name) as http:
                answer = await answered(
                    http, "POST", f"/jobs/{kept}/delete-history", json={"reason": "probe"}
                )
            assert answer.status_code == status, (name, answer.text)
            assert "invoice" not in answer.text
            assert "test.keeper" not in answer.text
        assert Keeper.asked == []  # no principal without the right made the plugin's hook run
        async with as_("admin") as admin:
            vetoed = await admin.post(f"/jobs/{kept}/delete-history", json={"reason": "tidy up"})
        assert vetoed.status_code == 409
        assert "the partner's invoice still points at it" in vetoed.json()["message"]
        assert len(Keeper.asked) == 1
