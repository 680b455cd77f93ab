"""Where a lone job's time goes: each record a job wrote, at its timestamp after the job's submit record.

A record's timestamp is the time the worker decided what it says (the submit record's, the client's
send), so the mean offset of each kind of record is a timeline of the job's steps; what comes after
the completion is the client's own wait for it.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from uuid import UUID

from schemas.codec import decode_or_none
from streams.broker.access import KafkaAccess
from streams.broker.clients import kafka_consumer
from streams.broker.compat import partitions_known

QUIET_POLLS = 4
SUBMIT_TOPIC = "scrapestream.submit"


async def record_timeline(access: KafkaAccess, job_ids: set[UUID]) -> dict[str, object]:
    """The timeline of the jobs whose due work went through the broker (to another process), and of
    those whose due work was handed over in memory."""
    written: dict[UUID, dict[str, int]] = defaultdict(dict)
    consumer = kafka_consumer(access, enable_auto_commit=False)
    await consumer.start()
    try:
        topics = [topic for topic in await consumer.topics() if topic.startswith("scrapestream.")]
        consumer.assign(await partitions_known(consumer, topics))
        await consumer.seek_to_beginning()
        quiet = 0
        while quiet < QUIET_POLLS:
            polled = await consumer.getmany(timeout_ms=500)
            quiet = 0 if polled else quiet + 1
            for partition, records in polled.items():
                for record in records:
                    value = decode_or_none(record.value)
                    job_id = getattr(value, "job_id", None)
                    if partition.topic == SUBMIT_TOPIC and record.key is not None:
                        job_id = UUID(record.key.decode())  # a submission's key is its job id here
                    if job_id in job_ids:
                        kind = f"{partition.topic.removeprefix('scrapestream.')}:{type(value).__name__}"
                        written[job_id].setdefault(kind, record.timestamp)
    finally:
        await consumer.stop()
    crossed = [kinds for kinds in written.values() if "due:DueWork" in kinds]
    kept = [kinds for kinds in written.values() if "due:DueWork" not in kinds]
    return {"timeline_due_work_published": timeline(crossed), "timeline_due_work_handed_over": timeline(kept)}


def timeline(jobs: list[dict[str, int]]) -> dict[str, float]:
    """Mean ms after the submit record of each kind of record, in the order they come, and the jobs."""
    offsets: dict[str, list[int]] = defaultdict(list)
    for kinds in jobs:
        submitted = kinds.get("submit:SubmitJob")
        for kind, at in kinds.items():
            if submitted is not None:
                offsets[kind].append(at - submitted)
    means = sorted((statistics.mean(values), kind) for kind, values in offsets.items())
    return {"jobs": len(jobs)} | {kind: round(mean, 2) for mean, kind in means}
