"""A producer on the submit topic registers a hostile writer schema in the deployment's schema registry
and frames records with its id: a self-containing record (nesting as deep as the bytes say) and an
array of zero-byte items with a block count of 2^50. Unsigned, such a record is refused before any
byte of it is decoded or any registry lookup made; signed, its writer schema is refused. The worker,
`scrapestream tail` and the Python client all go on."""

from __future__ import annotations

import asyncio
import json
import re
import struct
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from uuid import uuid4

import httpx
import pytest
import pytest_asyncio
from aiokafka import AIOKafkaProducer

from schemas.commands import SubmitJob
from schemas.enums import AnswerKind, JobStatus
from schemas.records import Request
from streams.auth.signing import Binding, private_key_from_text, sign
from streams.broker.headers import Headers
from streams.client import Client
from streams.clock import utc_now
from streams.runtime.schema_registry import SchemaRegistry
from tests.brokers import profile
from tests.commands import run
from tests.e2e.cluster import auth_on, signed_client
from tests.e2e.conftest import Observer, System, running_system
from tests.principals import ISSUED

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("kafka")]

SELF_CONTAINING = {
    "type": "record",
    "name": "SubmitJob",
    "namespace": "scrapestream.v1",
    "fields": [{"name": "next", "type": ["null", "SubmitJob"]}],
}
ZERO_BYTE_ITEMS = {
    "type": "record",
    "name": "SubmitJob",
    "namespace": "scrapestream.v1",
    "fields": [{"name": "items", "type": {"type": "array", "items": "null"}}],
}


def zigzag(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


DEEP_BODY = b"\x02" * 200_000 + b"\x00"  # branch 1 (another SubmitJob) 200,000 times, then null
HUGE_COUNT_BODY = zigzag(2**50) + b"\x00"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(broker, schema_registry, tmp_path_factory) -> AsyncIterator[System]:
    settings = auth_on(
        broker.bootstrap,
        tmp_path_factory.mktemp("registry-hostility"),
        deployment_id="registry-hostility",
        schema_registry_url=schema_registry,
    )
    async with running_system(settings) as running:
        running.answers = await Observer(settings.kafka_access, settings.topic("answers")).start()
        yield running


async def registered(registry: str, schema: dict) -> int:
    """The attacker registers its schema under a subject of its own (registries rarely refuse one)."""
    async with httpx.AsyncClient(base_url=registry, timeout=30) as http:
        answer = await http.post(
            f"/subjects/attacker-{uuid4().hex}-value/versions", json={"schema": json.dumps(schema)}
        )
        answer.raise_for_status()
        return int(answer.json()["id"])


def framed(schema_id: int, body: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + body


def signed_by(system: System, name: str, value: bytes) -> Headers:
    binding = Binding(system.settings.deployment_id, system.settings.topic("submit"))
    return tuple(sign(name, private_key_from_text(ISSUED[name].signing_key), value, binding))


async def produced(system: System, values: list[tuple[bytes, Headers]]) -> list[tuple[int, int]]:
    producer = AIOKafkaProducer(bootstrap_servers=system.settings.kafka_bootstrap)
    await producer.start()
    try:
        placed = []
        for value, headers in values:
            sent = await producer.send_and_wait(
                system.settings.topic("submit"), value, key=b"attacker", headers=list(headers)
            )
            placed.append((sent.partition, sent.offset))
        return placed
    finally:
        await producer.stop()


async def answers_to(system: System, placed: list[tuple[int, int]]) -> list:
    assert system.answers is not None
    wanted = set(placed)

    def at(records: list) -> dict:
        return {(r.source_partition, r.source_offset): r for r in records if hasattr(r, "source_offset")}

    await system.answers.wait_for(lambda records: wanted <= at(records).keys(), 90)
    found = at(system.answers.records)
    return [found[position] for position in placed]


def submission(origin) -> SubmitJob:
    deadline = utc_now() + timedelta(minutes=5)
    return SubmitJob(
        caller_identity="svc-a", request=Request(url=origin.url(f"/page/{uuid4().hex}")), deadline_at=deadline
    )


async def signed_job(system: System, origin):
    async with signed_client(system.settings, "svc-a") as client:
        job_id = await client.submit(submission(origin))
    return await system.completion(job_id, 90)


async def registry_lookups(system: System) -> dict[str, float]:
    assert system.worker is not None
    headers = {"Authorization": f"Bearer {ISSUED['admin'].token}"}
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{system.worker.web_port}", headers=headers
    ) as http:
        answer = await http.get("/healthz")  # the event loop answers: nothing holds it
        assert answer.status_code == 200
        text = (await http.get("/metrics")).text
    return {
        result: float(count)
        for result, count in re.findall(
            r'^scrapestream_registry_lookups\{result="(\w+)"\} (\S+)$', text, re.M
        )
    }


@pytest.mark.kafka_only
async def test_unsigned_records_with_hostile_writers_are_refused_unread_and_cost_no_lookup(
    system, schema_registry, origin
):
    deep = await registered(schema_registry, SELF_CONTAINING)
    huge = await registered(schema_registry, ZERO_BYTE_ITEMS)
    unknown = 2**31 - 7  # an id no registry has: a lookup each, were it made
    before = await registry_lookups(system)
    values = [framed(deep, DEEP_BODY), framed(huge, HUGE_COUNT_BODY), framed(unknown, b"\x00")]
    answers = await answers_to(system, await produced(system, [(value, ()) for value in values]))
    assert [answer.answer for answer in answers] == [AnswerKind.DEAD_INPUT] * 3
    assert all("refused" in (answer.reason or "") for answer in answers)
    assert await registry_lookups(system) == before
    assert (await signed_job(system, origin)).status is JobStatus.SUCCEEDED  # a signed one still goes through


@pytest.mark.kafka_only
async def test_a_signed_record_with_a_hostile_writer_is_dead_input_and_the_worker_goes_on(
    system, schema_registry, origin
):
    deep = await registered(schema_registry, SELF_CONTAINING)
    huge = await registered(schema_registry, ZERO_BYTE_ITEMS)
    values = [framed(deep, DEEP_BODY), framed(huge, HUGE_COUNT_BODY)]
    placed = await produced(system, [(value, signed_by(system, "svc-a", value)) for value in values])
    answers = await answers_to(system, placed)
    assert [answer.answer for answer in answers] == [AnswerKind.DEAD_INPUT] * 2
    assert all("unknown registry schema id" in (answer.reason or "") for answer in answers)
    assert (await registry_lookups(system)).get("refused", 0) >= 2
    assert (await signed_job(system, origin)).status is JobStatus.SUCCEEDED


@pytest.mark.kafka_only
async def test_tail_and_the_client_read_past_hostile_writers(system, schema_registry, origin):
    deep = await registered(schema_registry, SELF_CONTAINING)
    huge = await registered(schema_registry, ZERO_BYTE_ITEMS)
    topic = system.settings.topic("completions")  # anyone with write access to it may put them there
    producer = AIOKafkaProducer(bootstrap_servers=system.settings.kafka_bootstrap)
    await producer.start()
    try:
        for partition in range(system.settings.partitions):
            for value in (framed(deep, DEEP_BODY), framed(huge, HUGE_COUNT_BODY)):
                await producer.send_and_wait(topic, value, key=b"attacker", partition=partition)
    finally:
        await producer.stop()
    settings = system.settings
    async with signed_client(settings, "svc-a") as client:
        job_id = await client.submit(submission(origin))
    registry = SchemaRegistry(schema_registry)
    reader = Client(
        settings.kafka_access, profile(settings.kafka_bootstrap), settings.topic_prefix, None, registry
    )
    async with reader, asyncio.timeout(90):
        assert (await reader.wait_for(job_id)).status is JobStatus.SUCCEEDED
    code, said = await run(
        *("tail", "completions", "--from-beginning", "--until-end", "--json"),
        cwd=Path.cwd(),
        kafka_bootstrap=settings.kafka_bootstrap,
        topic_prefix=settings.topic_prefix,
        schema_registry_url=schema_registry,
    )
    assert code == 0, said
    shown = [json.loads(line) for line in said.splitlines() if line.startswith("{")]
    refused = [line for line in shown if "error" in line]
    assert len(refused) == 2 * settings.partitions
    assert all("unknown registry schema id" in line["error"] for line in refused)
    assert any((line.get("value") or {}).get("job_id") == str(job_id) for line in shown)
