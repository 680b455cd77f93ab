"""The client's readers skip what no scrapestream writer makes: anyone may write to its topics."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from schemas.enums import JobStatus
from schemas.events import JobCompleted, SubmissionReused
from streams.client import Client
from streams.runtime.publisher import Outgoing, Publisher, outgoing
from tests.brokers import fresh_topics

pytestmark = pytest.mark.broker

FOREIGN = [b"not avro", b"\xc3\x01" + b"\x00" * 8, b"\x00\x00\x00\x00\x07body", b""]


async def test_wait_follow_and_completions_skip_foreign_records_and_tombstones(broker):
    settings = await fresh_topics(broker)
    job_id = uuid4()
    now = datetime.now(UTC)
    event = SubmissionReused(
        event_id=uuid4(), job_id=job_id, sequence=2, occurred_at=now, command_id=uuid4(), caller_identity="a"
    )
    completion = JobCompleted(
        job_id=job_id,
        caller_identity="a",
        idempotency_key="k",
        job_type="http.fetch",
        url="https://example.com/",
        status=JobStatus.SUCCEEDED,
        attempt_count=1,
        completed_at=now,
    )
    key = str(job_id).encode()
    hostile: list[Outgoing] = []
    for name in ("events", "completions"):
        hostile += [Outgoing(settings.topic(name), key, value) for value in FOREIGN]
        hostile.append(Outgoing(settings.topic(name), key, b"", tombstone=True))
    publisher = Publisher(broker.access, broker.profile)
    await publisher.start()
    try:
        await publisher.send_all(hostile)
        await publisher.send_all(
            [
                outgoing(settings.topic("events"), job_id, event),
                outgoing(settings.topic("completions"), job_id, completion),
            ]
        )
    finally:
        await publisher.stop()

    async with Client(broker.access, broker.profile, topic_prefix=settings.topic_prefix) as client:
        assert await client.wait_for(job_id) == completion
        async for followed in client.follow(job_id):
            assert followed == event
            break
        async for completed in client.completions():
            assert completed == completion
            break
