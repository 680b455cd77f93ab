"""Every record on the submit topic gets one answer, matched by its producer without scrapestream's help."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import timedelta
from uuid import uuid4

import msgspec
import pytest
import pytest_asyncio
from aiokafka import AIOKafkaProducer

from schemas.codec import encode
from schemas.commands import CancelJob, SubmitJob
from schemas.enums import ActorRole, AnswerKind, JobStatus, RejectionReason
from schemas.records import Request
from streams.clock import utc_now
from tests.e2e.conftest import Observer, running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(broker, tmp_path_factory):
    async with running_system(
        worker_settings(broker.bootstrap, tmp_path_factory.mktemp("answers"))
    ) as running:
        answers = running.settings.topic("answers")
        running.answers = await Observer(running.settings.kafka_access, answers).start()
        yield running


async def produce(system, values: list[bytes], correlation: str) -> list[tuple[int, int]]:
    """Publish as an outside producer does; returns each record's partition and offset."""
    producer = AIOKafkaProducer(bootstrap_servers=system.settings.kafka_bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        placed = []
        for index, value in enumerate(values):
            headers = [("scrapestream-correlation-id", f"{correlation}-{index}".encode())]
            sent = await producer.send_and_wait(
                system.settings.topic("submit"), value, key=f"{correlation}-key".encode(), headers=headers
            )
            placed.append((sent.partition, sent.offset))
        return placed
    finally:
        await producer.stop()


async def answers_to(system, placed: list[tuple[int, int]]):
    wanted = set(placed)

    def answered(records) -> bool:
        return wanted <= {(r.source_partition, r.source_offset) for r in records if hasattr(r, "answer")}

    records = await system.answers.wait_for(answered)
    found = {}
    for raw, record in zip(system.answers.raw, records, strict=False):
        if (record.source_partition, record.source_offset) in wanted:
            found.setdefault((record.source_partition, record.source_offset), []).append((raw, record))
    return [found[position] for position in placed]


def submission(url: str, **fields) -> SubmitJob:
    fields.setdefault("caller_identity", "svc-answers")
    return SubmitJob(
        request=Request(url=url), deadline_at=utc_now() + timedelta(minutes=5), command_id=uuid4(), **fields
    )


async def test_each_record_is_answered_once_by_its_key_position_command_id_and_correlation(system, origin):
    first = submission(origin.url(f"/page/{uuid4().hex}"), idempotency_key=f"k-{uuid4().hex}")
    again = msgspec.structs.replace(first, command_id=uuid4())
    other_url = msgspec.structs.replace(first, command_id=uuid4(), request=Request(url=origin.url("/page/x")))
    correlation = uuid4().hex
    values = [encode(first), encode(first), encode(again), encode(other_url), b"\x00not avro at all"]
    placed = await produce(system, values, correlation)
    answers = await answers_to(system, placed)
    assert [len(found) for found in answers] == [1, 1, 1, 1, 1]
    (created, repeated, reused, rejected, dead) = [found[0][1] for found in answers]
    for index, ((raw, record),) in enumerate(answers):
        assert raw.key == f"{correlation}-key".encode()
        assert dict(raw.headers)["scrapestream-correlation-id"] == f"{correlation}-{index}".encode()
        assert record.correlation_id == f"{correlation}-{index}"
    # a batch read again after a failed commit (a fresh topic's leader moving) answers REPEATED: CONTRACT
    assert created.answer in {AnswerKind.CREATED, AnswerKind.REPEATED}
    assert created.command_id == first.command_id
    assert created.command_type == "SubmitJob"
    assert created.job_status in {JobStatus.PENDING, JobStatus.LEASED}
    assert repeated.answer is AnswerKind.REPEATED
    assert repeated.job_id == created.job_id
    assert reused.answer is AnswerKind.REUSED
    assert reused.job_id == created.job_id
    assert reused.command_id == again.command_id
    assert rejected.answer is AnswerKind.REJECTED
    assert rejected.rejection is RejectionReason.IDEMPOTENCY_KEY_REUSED
    assert dead.answer is AnswerKind.DEAD_INPUT
    assert "undecodable" in dead.reason
    assert (await system.completion(created.job_id)).status is JobStatus.SUCCEEDED


async def test_a_reuse_of_a_finished_job_answers_with_its_outcome(system, origin):
    first = submission(origin.url(f"/page/{uuid4().hex}"))
    job_id = await system.client.submit(first)
    assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED
    placed = await produce(system, [encode(msgspec.structs.replace(first, command_id=uuid4()))], uuid4().hex)
    (((_, reused),),) = await answers_to(system, placed)
    assert (reused.answer, reused.job_id, reused.job_status) == (
        AnswerKind.REUSED,
        job_id,
        JobStatus.SUCCEEDED,
    )


async def test_mutations_are_answered_applied_or_refused(system, origin):
    job_id = await system.submit(origin.url(f"/slow/{uuid4().hex}"), caller_identity="svc-answers")
    cancel = CancelJob(
        job_id=job_id, command_id=uuid4(), actor_id="svc-answers", actor_role=ActorRole.SERVICE, reason="done"
    )
    unknown = msgspec.structs.replace(cancel, job_id=uuid4(), command_id=uuid4())
    placed = await produce(system, [encode(cancel), encode(unknown)], uuid4().hex)
    (((_, applied),), ((_, refused),)) = await answers_to(system, placed)
    assert (applied.answer, applied.job_id, applied.command_type) == (AnswerKind.APPLIED, job_id, "CancelJob")
    assert applied.job_status is JobStatus.CANCELLED
    assert refused.answer is AnswerKind.REFUSED
    assert refused.job_id == unknown.job_id
    assert refused.reason


async def tail(system, *arguments: str) -> list[dict]:
    return [json.loads(line) for line in (await tail_text(system, *arguments)).splitlines()]


async def tail_text(system, *arguments: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPESTREAM_")} | {
        "SCRAPESTREAM_KAFKA_BOOTSTRAP": system.settings.kafka_bootstrap,
        "SCRAPESTREAM_BROKER_PROFILE": system.settings.broker_profile,
        "SCRAPESTREAM_TOPIC_PREFIX": system.settings.topic_prefix,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "streams.cli.main", "tail", *arguments, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_tail_shows_a_producers_escape_sequences_escaped(system):
    correlation = uuid4().hex
    producer = AIOKafkaProducer(bootstrap_servers=system.settings.kafka_bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            system.settings.topic("submit"),
            b"\xc3\x01\x1b[2J not avro",
            key=f"{correlation}\x1b]0;retitled\x07\x1b[2J".encode(),
            headers=[("scrapestream-correlation-id", b"\x1b[31mred\x9b1m")],
        )
    finally:
        await producer.stop()
    shown = await tail_text(system, "submit", "--from-beginning", "--until-end")
    line = next(line for line in shown.splitlines() if correlation in line)
    assert "\x1b" not in shown
    assert "\x9b" not in shown
    assert "\\x1b]0;retitled\\x07" in line


async def test_tail_shows_any_topic_decoded_and_what_does_not_decode_as_such(system, origin):
    correlation = uuid4().hex
    placed = await produce(
        system, [encode(submission(origin.url("/page/tail"))), b"\xc3\x01garbage"], correlation
    )
    await answers_to(system, placed)
    submitted = await tail(system, "submit", "--from-beginning", "--until-end", "--json")
    mine = [
        r for r in submitted if r["headers"].get("scrapestream-correlation-id", "").startswith(correlation)
    ]
    assert [r["record"] for r in mine] == ["SubmitJob", None]
    assert mine[0]["value"]["request"]["url"] == origin.url("/page/tail")
    assert "10-byte header" in mine[1]["error"]
    assert mine[1]["key"] == f"{correlation}-key"
    answered = await tail(system, "answers", "--from-beginning", "--until-end", "--json")
    kinds = {
        r["value"]["answer"] for r in answered if (r["value"]["correlation_id"] or "").startswith(correlation)
    }
    assert kinds == {"CREATED", "DEAD_INPUT"}
    (one,) = await tail(
        system, system.settings.topic("answers"), "--from-beginning", "--count", "1", "--json"
    )
    assert one["record"] == "SubmissionAnswer"
