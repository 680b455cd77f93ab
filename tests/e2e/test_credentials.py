"""Credentials handed to jobs by name: resolved by the worker at run time, sent to the job's own
origin only, never written to a record, never cached for anyone else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from schemas.enums import JobStatus, TransportPolicy
from tests.e2e.conftest import Origin, System, read_topic, running_system, worker_settings
from tests.servers import loopback

pytestmark = pytest.mark.asyncio(loop_scope="module")
SECRET = "s3cr3t"


def credentials(port: int) -> dict[str, Any]:
    """The deployment's credentials, each bound to the origins it may be sent to."""
    own = f"http://127.0.0.1:{port}"
    return {
        "partner": {"headers": {"Authorization": f"Bearer {SECRET}"}, "callers": ["svc-a"], "origins": [own]},
        "elsewhere": {
            "headers": {"Authorization": "Bearer not-this-one"},
            "job_types": ["test.other"],
            "origins": [own],
        },
        "carried": {
            "headers": {"Authorization": f"Bearer {SECRET}"},
            "origins": [own],
            "through_proxy": True,
        },
    }


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def other_origin() -> AsyncIterator[Origin]:
    server = Origin(host="127.0.0.2")
    async with loopback(server.handle, server.host) as server.port:
        yield server


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(broker, origin, tmp_path_factory) -> AsyncIterator[System]:  # type: ignore[no-untyped-def]
    settings = worker_settings(
        broker.bootstrap, tmp_path_factory.mktemp("credentials"), credentials=credentials(origin.port)
    )
    async with running_system(settings) as running:
        yield running


async def attempts(system: System, job_id) -> list:  # type: ignore[no-untyped-def]
    await system.completion(job_id)
    return await system.attempts_seen(job_id)


async def test_a_job_carrying_a_credential_reaches_the_page_and_no_record_or_artifact_holds_it(
    system, origin
):
    url = origin.url("/private/report")
    first = await system.submit(url, caller_identity="svc-a", credential="partner")
    assert (await system.completion(first)).status is JobStatus.SUCCEEDED
    anonymous = await system.submit(url, caller_identity="svc-a")  # the same page without it
    assert (await system.completion(anonymous)).failure.code == "HTTP_401"
    again = await system.submit(url, caller_identity="svc-a", credential="partner", idempotency_key="again")
    assert (await system.completion(again)).status is JobStatus.SUCCEEDED
    (answer,) = await attempts(system, again)
    assert not answer.from_cache  # an answer to a credential is never served from the shared cache
    assert origin.authorizations["/private/report"] == [f"Bearer {SECRET}", None, f"Bearer {SECRET}"]
    settings = system.settings
    for name in ("submit", "commands", "events", "due", "completions", "cache", "snapshots", "references"):
        records = await read_topic(settings.kafka_bootstrap, settings.topic(name), settings.partitions)
        assert not [r for r in records if r.value and SECRET.encode() in r.value], name
    assert not holding(Path(settings.data_dir), SECRET.encode())  # the stores and the artifacts


def holding(directory: Path, secret: bytes) -> list[Path]:
    return [path for path in directory.rglob("*") if path.is_file() and secret in path.read_bytes()]


async def test_a_credential_is_never_sent_to_a_redirect_on_another_origin(system, origin, other_origin):
    url = origin.url(f"/away/127.0.0.2/{other_origin.port}/private/landing")
    job = await system.submit(url, caller_identity="svc-a", credential="partner")
    assert (await system.completion(job)).failure.code == "HTTP_401"
    assert other_origin.authorizations["/private/landing"] == [None]


@pytest.mark.parametrize(
    ("caller", "credential", "fields"),
    [
        ("svc-b", "partner", {}),  # another caller
        ("svc-a", "nowhere", {}),  # no such credential
        ("svc-a", "elsewhere", {}),  # not for this job type
        ("svc-a", "partner", {"transport_policy": TransportPolicy.BROWSER}),  # a page would spread it
        ("svc-a", "partner", {"transport_policy": TransportPolicy.PROXY_ALLOWED}),  # no proxy may carry it
    ],
)
async def test_a_credential_the_submission_may_not_carry_is_rejected(
    system, origin, caller, credential, fields
):
    job = await system.submit(
        origin.url("/private/refused"), caller_identity=caller, credential=credential, **fields
    )
    completion = await system.completion(job)
    assert (completion.status, completion.failure.code) == (JobStatus.REJECTED, "CREDENTIAL_NOT_ALLOWED")
    assert "not-this-one" not in completion.failure.safe_message
    assert origin.authorizations["/private/refused"] == []


async def test_a_credential_cannot_be_sent_to_the_callers_own_server(system, origin, other_origin):
    """The caller it is granted to points a job at a server it runs, to read the value there."""
    for url in (
        other_origin.url("/private/collect"),
        f"http://localhost:{origin.port}/private/collect",  # the same server by another name
        f"http://127.0.0.1:{other_origin.port}/private/collect",  # the same host, another port
    ):
        job = await system.submit(url, caller_identity="svc-a", credential="partner")
        completion = await system.completion(job)
        assert (completion.status, completion.failure.code) == (JobStatus.REJECTED, "CREDENTIAL_NOT_ALLOWED")
        assert f"may be sent to http://127.0.0.1:{origin.port} only" in completion.failure.safe_message
    assert other_origin.authorizations["/private/collect"] == []
    assert origin.authorizations["/private/collect"] == []


async def test_a_credential_a_proxy_may_carry_is_sent_through_one_only_when_its_grant_says_so(system, origin):
    job = await system.submit(
        origin.url("/private/carried"),
        caller_identity="svc-a",
        credential="carried",
        transport_policy=TransportPolicy.PROXY_ALLOWED,
    )
    assert (await system.completion(job)).status is JobStatus.SUCCEEDED  # the direct route, here
