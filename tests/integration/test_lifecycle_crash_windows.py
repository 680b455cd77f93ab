"""The lifecycle agent's crash windows, on the real broker: nothing lost, no event twice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from projections.jobstore import JobStore
from projections.storage.memory import MemoryStore
from schemas.codec import decode
from schemas.enums import ArtifactTrust, AttemptOutcome, JobStatus, TransportRoute
from schemas.records import Attempt
from streams.agents.lifecycle import Lifecycle
from streams.broker.compat import EMBEDDED_TANSU, end_offsets
from streams.clock import utc_now
from streams.publisher import Outgoing, Publisher
from streams.settings import load_settings
from streams.topics import ensure_topics
from tests.lifecycle import report, submit

PARTITION = 0


class SimulatedCrashError(Exception):
    pass


class CrashingPublisher(Publisher):
    """The real publisher, except that its Nth batch never leaves: the process dies there."""

    def __init__(self, bootstrap: str, crash_on_batch: int) -> None:
        super().__init__(bootstrap, EMBEDDED_TANSU)
        self._batches = 0
        self._crash_on_batch = crash_on_batch

    async def send_all(self, messages: Sequence[Outgoing]) -> list[Any]:
        self._batches += 1
        if self._batches == self._crash_on_batch:
            raise SimulatedCrashError
        return await super().send_all(messages)


class CrashingStore(MemoryStore):
    """Memory storage whose first write is lost with the process."""

    def __init__(self) -> None:
        super().__init__()
        self.crashed = False

    def write(self, changes: Mapping[bytes, bytes | None]) -> None:
        if not self.crashed:
            self.crashed = True
            raise SimulatedCrashError
        super().write(changes)


@pytest.fixture
async def settings(broker, tmp_path):
    values = load_settings(
        kafka_bootstrap=broker.bootstrap,
        broker_profile="embedded",
        data_dir=tmp_path,
        partitions=1,
        topic_prefix=f"t{uuid4().hex[:8]}",
    )
    await ensure_topics(values)
    return values


async def read_all(settings, name: str) -> list[Any]:
    topic = TopicPartition(settings.topic(name), PARTITION)
    end = (await end_offsets(settings.kafka_bootstrap, [topic], EMBEDDED_TANSU))[topic]
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, fetch_max_wait_ms=10)
    await consumer.start()
    records: list[Any] = []
    try:
        consumer.assign([topic])
        consumer.seek(topic, 0)
        while len(records) < end:
            batch = await consumer.getmany(topic, timeout_ms=1000)
            records += [decode(record.value) for record in batch.get(topic, [])]
        return records
    finally:
        await consumer.stop()


def lifecycle(settings, store: JobStore, publisher: Publisher) -> Lifecycle:
    return Lifecycle(settings, EMBEDDED_TANSU, store, publisher, settings.policy(), utc_now)


async def test_crash_after_publishing_consequences_appends_the_events_once_on_redelivery(settings):
    command = submit(deadline_at=utc_now() + timedelta(hours=1))
    store = JobStore(MemoryStore())
    crashing = CrashingPublisher(settings.kafka_bootstrap, crash_on_batch=2)
    await crashing.start()
    try:
        with pytest.raises(SimulatedCrashError):
            await lifecycle(settings, store, crashing).handle(PARTITION, command)
    finally:
        await crashing.stop()
    publisher = Publisher(settings.kafka_bootstrap, EMBEDDED_TANSU)
    await publisher.start()
    try:
        restarted = lifecycle(settings, store, publisher)
        await restarted.catch_up(PARTITION)
        await restarted.handle(PARTITION, command)
    finally:
        await publisher.stop()
    events = await read_all(settings, "events")
    assert [type(e).__name__ for e in events] == ["JobAccepted", "JobDispatched"]
    due = await read_all(settings, "due")
    # The consequence is published again, with the same fencing token: duplicates, never loss.
    assert len(due) == 2
    assert due[0].lease_id == due[1].lease_id


async def test_crash_after_appending_events_is_healed_from_the_log_and_the_redelivery_adds_nothing(settings):
    command = submit(deadline_at=utc_now() + timedelta(hours=1))
    memory = CrashingStore()
    publisher = Publisher(settings.kafka_bootstrap, EMBEDDED_TANSU)
    await publisher.start()
    try:
        with pytest.raises(SimulatedCrashError):
            await lifecycle(settings, JobStore(memory), publisher).handle(PARTITION, command)
        restarted = lifecycle(settings, JobStore(memory), publisher)
        assert await restarted.catch_up(PARTITION) == 2
        assert await restarted.handle(PARTITION, command) == []
        job = JobStore(memory).load(submission_job_id(command))
        assert job.status is JobStatus.LEASED
    finally:
        await publisher.stop()
    events = await read_all(settings, "events")
    assert [type(e).__name__ for e in events] == ["JobAccepted", "JobDispatched"]
    assert len(await read_all(settings, "due")) == 1


async def test_a_worker_with_an_empty_store_rebuilds_jobs_from_the_log(settings):
    publisher = Publisher(settings.kafka_bootstrap, EMBEDDED_TANSU)
    await publisher.start()
    try:
        first_store = JobStore(MemoryStore())
        command = submit(deadline_at=utc_now() + timedelta(hours=1))
        await lifecycle(settings, first_store, publisher).handle(PARTITION, command)
        leased = first_store.load(submission_job_id(command))
        taking_over = lifecycle(settings, JobStore(MemoryStore()), publisher)
        assert await taking_over.catch_up(PARTITION) == 2
        attempt = Attempt(
            attempt_number=leased.lease.attempt_number,
            lease_id=leased.lease.lease_id,
            route=TransportRoute.DIRECT,
            outcome=AttemptOutcome.FETCHED,
            trust=ArtifactTrust.VERIFIED,
            finished_at=utc_now(),
        )
        events = await taking_over.handle(PARTITION, report(leased, attempt))
    finally:
        await publisher.stop()
    assert [type(e).__name__ for e in events] == ["AttemptRecorded", "JobSucceeded"]
    assert [e.sequence for e in events] == [3, 4]


def submission_job_id(command):
    from projections.lifecycle.submission import submission_identity

    return submission_identity(command)[0]
