"""A job type run by an outside executor in another process, written without scrapestream's package:
it reads the type's due topic and reports signed results through the submit topic; the trusted
worker checks each result against the type's declared schema, stores what the type's hook makes of
it, and decides the outcome."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import fastavro
import httpx
import pytest
from fastavro.schema import fingerprint, to_parsing_canonical_form

from projections.lifecycle.decide import MAX_STALE_TRACES
from schemas.codec import SINGLE_OBJECT_MARKER, decode
from schemas.commands import CancelJob, ReportRemoteAttempt, SubmitJob
from schemas.enums import ActorRole, ExpiryReason, JobStatus
from schemas.events import LeaseExpired, StaleReportIgnored
from schemas.records import Request
from schemas.work import DueWork
from streams.auth.issue import issue
from streams.auth.signing import Binding, private_key_from_text, sign
from streams.client import Client, Signer
from streams.clock import utc_now
from streams.jobtypes import runnable_here
from streams.runtime.publisher import Outgoing, Publisher, outgoing
from streams.settings import Settings
from streams.worker import Worker
from tests.e2e.conftest import System, observed_system, read_topic, worker_settings
from tests.raw_http import head_of, raw_exchange

pytestmark = pytest.mark.asyncio(loop_scope="module")
ROOT = Path(__file__).parent.parent.parent
PLUGINS = ROOT / "tests" / "plugins"
EXECUTOR = ROOT / "tests" / "remote_executor.py"
ISSUED = {
    "ops": issue("ops", ActorRole.OPERATOR),
    "svc-a": issue("svc-a", ActorRole.SERVICE),
    "remote": issue("remote", ActorRole.SERVICE),
    "stranger": issue("stranger", ActorRole.SERVICE),
}


def principals() -> str:
    entries = [dict(issued.entry) for issued in ISSUED.values()]
    for entry in entries:
        entry["runs"] = ["test.remote"] if entry["name"] == "remote" else []
    return json.dumps({"principals": entries})


@contextlib.asynccontextmanager
async def outside_executor(  # type: ignore[no-untyped-def]
    settings, result_schema: dict, **login: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    """The executor script in its own interpreter, outside the repository's packages' reach; `login`
    is its own Kafka login (`SECURITY_PROTOCOL`, `SASL_*`, `SSL_CA_FILE`, `GROUP`), none by default."""
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "BOOTSTRAP": settings.kafka_bootstrap,
        "DUE_TOPIC": settings.due_topic("test.remote"),
        "SUBMIT_TOPIC": settings.topic("submit"),
        "GROUP": f"{settings.consumer_group}-outside",
        "AVSC_DIR": str(ROOT / "schemas" / "avsc"),
        "RESULT_SCHEMA": json.dumps(result_schema),
        "DEPLOYMENT": settings.deployment_id,
        "KEYS": json.dumps({name: ISSUED[name].signing_key for name in ("remote", "stranger")}),
    } | login
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-I", str(EXECUTOR), env=environment, cwd="/", stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        assert (await asyncio.wait_for(process.stdout.readline(), 60)).strip() == b"ready"
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


@dataclass
class Deployed:
    settings: Settings
    worker: Worker
    system: System
    client: Client  # signs as svc-a
    result_schema: dict[str, Any]


@contextlib.asynccontextmanager
async def deployed(
    broker: Any, tmp_path: Path, monkeypatch: Any, **overrides: Any
) -> AsyncIterator[Deployed]:
    """A worker with auth on that knows `test.remote`, observed, and svc-a's signed client."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    from scrapestream_echo import Remote

    settings = worker_settings(
        broker.bootstrap,
        tmp_path,
        auth_enabled=True,
        principals=principals(),
        deployment_id="remote-tests",
        peer_secret="the-peer-secret-of-the-remote-tests-0123456789",
        lease_grace_ms=1_000,
        start_window_ms=3_000,
        **({"profiles": {"test.remote": (2_000, 2)}} | overrides),
    )
    worker = Worker(settings)
    await worker.start()
    try:
        signer = Signer("svc-a", ISSUED["svc-a"].signing_key, deployment=settings.deployment_id)
        async with (
            observed_system(settings, worker) as system,
            Client(settings.kafka_access, broker.profile, settings.topic_prefix, signer) as client,
        ):
            yield Deployed(settings, worker, system, client, Remote.result_schema)
    finally:
        await worker.stop()


def remote_job(url: str) -> SubmitJob:
    deadline = utc_now() + timedelta(minutes=5)
    return SubmitJob(
        caller_identity="svc-a", request=Request(url=url), job_type="test.remote", deadline_at=deadline
    )


async def lines_until(process: asyncio.subprocess.Process, wanted: str, timeout_s: float = 60) -> list[str]:
    """What the executor printed, up to and including the first line that starts with `wanted`."""
    assert process.stdout is not None
    said: list[str] = []
    async with asyncio.timeout(timeout_s):
        while not said or not said[-1].startswith(wanted):
            said.append((await process.stdout.readline()).decode().strip())
    return said


async def test_an_outside_executor_runs_a_remote_type_and_the_worker_alone_decides_and_stores(
    broker, tmp_path, monkeypatch
):
    async with deployed(broker, tmp_path, monkeypatch) as run:
        settings, system = run.settings, run.system
        assert "test.remote" in run.worker.job_types
        assert "test.remote" not in runnable_here(settings, run.worker.job_types)  # outside executors run it
        async with outside_executor(settings, run.result_schema):
            jobs = {
                kind: await run.client.submit(remote_job(f"https://remote.example/{kind}/Hello"))
                for kind in ("good", "bad", "fail", "stranger")
            }
            good = await system.completion(jobs["good"])
            assert good.status is JobStatus.SUCCEEDED
            (artifact,) = good.artifacts
            stored = (settings.data_dir / "artifacts" / artifact.key).read_bytes()
            assert stored == b"Hello (5 letters)"  # what the type's hook made of the checked result
            bad = await system.completion(jobs["bad"])
            assert (bad.status, bad.failure.code) == (JobStatus.DEAD_LETTER, "RESULT_SCHEMA_MISMATCH")
            failed = await system.completion(jobs["fail"])
            assert (failed.status, failed.failure.code) == (JobStatus.DEAD_LETTER, "SOURCE_GONE")
            dead = await system.dead_input.wait_for(
                lambda records: any("may not run job type" in r.reason for r in records), timeout_s=60
            )
            assert any("principal stranger may not run job type 'test.remote'" in r.reason for r in dead)
            assert not system.completions.of_job(jobs["stranger"])  # its report changed nothing


async def test_stale_remote_reports_store_nothing_and_leave_a_bounded_trace(broker, tmp_path, monkeypatch):
    """A principal allowed to run the type floods a job with results under leases it made up."""
    async with deployed(broker, tmp_path, monkeypatch) as run:
        settings, system = run.settings, run.system
        job_id = await run.client.submit(remote_job("https://remote.example/good/Flood"))
        await system.events.wait_for(lambda _: "JobAccepted" in system.event_kinds(job_id))
        result = single_object(run.result_schema, {"title": "Flood", "words": 5})
        key = private_key_from_text(ISSUED["remote"].signing_key)
        binding = Binding(settings.deployment_id, settings.topic("submit"))
        flood = []
        for number in range(150):
            report = ReportRemoteAttempt(
                command_id=uuid4(),
                job_id=job_id,
                job_type="test.remote",
                attempt_number=1 + number % 3,
                lease_id=uuid4(),
                result_body=result,
                expires_at=utc_now() + timedelta(minutes=5),
            )
            message = outgoing(settings.topic("submit"), str(job_id), report)
            headers = tuple(sign("remote", key, message.value, binding))
            flood.append(Outgoing(message.topic, message.key, message.value, headers=headers))
        publisher = Publisher(settings.kafka_access, broker.profile)
        await publisher.start()
        try:
            await publisher.send_all(flood)
        finally:
            await publisher.stop()
        await system.events.wait_for(
            lambda _: system.event_kinds(job_id).count("StaleReportIgnored") >= MAX_STALE_TRACES
        )
        await asyncio.sleep(2)  # what the rest of the flood would add, had it added anything
        assert system.event_kinds(job_id).count("StaleReportIgnored") == MAX_STALE_TRACES
        stored = [path for path in (settings.data_dir / "artifacts").rglob("*") if path.is_file()]
        assert stored == []  # fenced before anything was stored
        assert not system.completions.of_job(job_id)


def single_object(schema: dict, record: dict) -> bytes:  # type: ignore[type-arg]
    header = SINGLE_OBJECT_MARKER + bytes.fromhex(
        fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO")
    )
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return header + out.getvalue()


async def test_a_remote_run_that_dies_after_its_start_is_charged_and_a_revoked_one_stops(
    broker, tmp_path, monkeypatch
):
    profiles = {"test.remote": (6_000, 2)}  # a lease its renewals (every 5 s at the least) keep
    async with deployed(broker, tmp_path, monkeypatch, profiles=profiles) as run:
        system = run.system
        async with outside_executor(run.settings, run.result_schema) as executor:
            died = await run.client.submit(remote_job("https://remote.example/die/Gone"))
            assert (await system.completion(died)).status is JobStatus.DEAD_LETTER
            await system.events.wait_for(lambda _: "JobDeadLettered" in system.event_kinds(died))
            expiries = [e for e in system.events.of_job(died) if isinstance(e, LeaseExpired)]
            assert [e.reason for e in expiries] == [ExpiryReason.EXPIRED, ExpiryReason.EXPIRED]  # charged
            assert "AttemptStarted" in system.event_kinds(died)
            slow = await run.client.submit(remote_job("https://remote.example/slow/Stopped"))
            await system.events.wait_for(lambda _: "LeaseRenewed" in system.event_kinds(slow))
            cancel = CancelJob(
                job_id=slow, reason="not needed", actor_id="svc-a", actor_role=ActorRole.SERVICE
            )
            await run.client.cancel(cancel)
            said = await lines_until(executor, f"revoked {slow}")
        assert not [line for line in said if line.startswith("reported") and str(slow) in line]
        assert (await system.completion(slow)).status is JobStatus.CANCELLED


async def test_a_remote_type_switched_off_holds_its_queued_work_until_it_is_on_again(
    broker, tmp_path, monkeypatch
):
    async with deployed(broker, tmp_path, monkeypatch) as run:
        system = run.system
        held = await run.client.submit(remote_job("https://remote.example/good/Held"))
        await system.events.wait_for(lambda _: "JobAccepted" in system.event_kinds(held))
        operator = {"Authorization": f"Bearer {ISSUED['ops'].token}"}
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{run.worker.web_port}", headers=operator
        ) as http:
            answer = await http.post("/job-types/test.remote/disable", json={"reason": "partner paused"})
            assert answer.status_code == 202, answer.text
            await switched(http, "test.remote", enabled=False)
            async with outside_executor(run.settings, run.result_schema) as executor:
                said = await lines_until(executor, f"revoked {held}")  # its start was refused
                assert not system.completions.of_job(held)
                answer = await http.post("/job-types/test.remote/enable", json={"reason": "resumed"})
                assert answer.status_code == 202, answer.text
                await switched(http, "test.remote", enabled=True)
                done = await system.completion(held, timeout_s=90)
        assert done.status is JobStatus.SUCCEEDED
        # What the executor ran and reported while the type was off (its revocation can come after
        # it reports, on a busy machine) was never recorded: one attempt, the one after it came on.
        await system.events.wait_for(lambda _: "JobSucceeded" in system.event_kinds(held))
        attempts = system.attempts(held)
        assert len(attempts) == 1, said
        started = [e for e in system.events.of_job(held) if isinstance(e, StaleReportIgnored)]
        assert any("switched off" in e.reason for e in started)


async def switched(http: httpx.AsyncClient, name: str, enabled: bool) -> None:
    async with asyncio.timeout(30):
        while True:
            listed = {item["name"]: item for item in (await http.get("/job-types")).json()["items"]}
            if listed[name]["enabled"] is enabled:
                return
            await asyncio.sleep(0.1)


async def test_a_result_too_large_for_a_record_is_uploaded_to_the_signed_url_its_work_carries(
    broker, tmp_path, monkeypatch
):
    async with deployed(broker, tmp_path, monkeypatch, profiles={"test.remote": (20_000, 2)}) as run:
        settings, system, port = run.settings, run.system, run.worker.web_port
        async with outside_executor(settings, run.result_schema) as executor:
            big = await run.client.submit(remote_job("https://remote.example/big/3000000"))
            said = await lines_until(executor, f"reported big {big}")
        assert f"uploaded 201 summaries/{big}/1" in said  # the type's output key hook chose it
        done = await system.completion(big)
        assert done.status is JobStatus.SUCCEEDED
        (artifact,) = done.artifacts
        stored = (settings.data_dir / "artifacts" / artifact.key).read_bytes()
        assert stored == b"x" * 3_000_000 + b" (3000000 letters)"
        left = [path.name for path in (settings.data_dir / "uploads").iterdir()]
        assert all(name.endswith(".claim") for name in left)  # read once, then removed; its URL is used
        work = next(w for w in await due_work(settings) if w.job_id == big and w.upload_url is not None)
        assert work.upload_url is not None
        async with httpx.AsyncClient() as http:
            again = await http.put(work.upload_url, content=b"a second result for a consumed URL")
            assert again.status_code == 409
            assert not any(path.stat().st_size > 64 for path in (settings.data_dir / "uploads").iterdir())
            forged = work.upload_url.replace("summaries", "elsewhere")
            assert (await http.put(forged, content=b"x")).status_code == 403
            tampered = work.upload_url.replace(str(work.lease_id), str(uuid4()))
            assert (await http.put(tampered, content=b"x")).status_code == 403
        head = head_of(
            "PUT",
            work.upload_url.removeprefix(f"http://127.0.0.1:{port}"),
            settings.remote_result_max_bytes + 1,
        )
        assert (await raw_exchange(port, head))[0] == 413  # before a byte of it is sent


async def due_work(settings: Settings) -> list[DueWork]:
    topic = settings.due_topic("test.remote")
    records = await read_topic(settings.kafka_bootstrap, topic, settings.partitions)
    return [decoded for r in records if r.value and isinstance(decoded := decode(r.value), DueWork)]
