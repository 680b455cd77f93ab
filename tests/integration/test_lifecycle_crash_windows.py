"""The lifecycle agent's crash windows, on the real broker: nothing lost, no event twice, no fork."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from projections.jobstore import JobStore
from projections.lifecycle.submission import submission_identity
from projections.storage.memory import MemoryStore
from schemas.codec import decode, encode
from schemas.enums import ArtifactTrust, AttemptOutcome, JobStatus, TransportRoute
from schemas.records import Attempt
from streams.agents.lifecycle import Incoming, Lifecycle
from streams.broker.compat import end_offsets
from streams.clock import utc_now
from streams.runtime.deadinput import DeadLetters
from streams.runtime.publisher import Outgoing, Publisher
from streams.settings import load_settings
from tests.brokers import fresh_topics, profile
from tests.lifecycle import report, submit

PARTITION = 0


class SimulatedCrashError(Exception):
    pass


class CrashingPublisher(Publisher):
    """The real publisher, except that its Nth batch never leaves: the process dies there."""

    def __init__(self, bootstrap: str, crash_on_batch: int) -> None:
        super().__init__(bootstrap, profile(bootstrap))
        self._batches = 0
        self._crash_on_batch = crash_on_batch

    async def send_all(self, messages: Sequence[Outgoing], batch: object = None) -> list[Any]:
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


@dataclass(frozen=True)
class CommandRecord:
    """What the consumer hands the lifecycle: a commands record with its own timestamp."""

    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes
    timestamp: int
    headers: tuple[tuple[str, bytes], ...] = ()


class Revoked:
    """A consumer that no longer owns any partition."""

    def owns(self, partition: TopicPartition) -> bool:
        return False

    def hold(self, partitions: Any, reason: str) -> None: ...

    def release(self, partitions: Any, reason: str) -> None: ...


@pytest.fixture
async def settings(broker, tmp_path):
    return await fresh_topics(broker, data_dir=tmp_path)


async def read_all(settings, name: str) -> list[Any]:
    topic = TopicPartition(settings.topic(name), PARTITION)
    end = (await end_offsets(settings.kafka_access, [topic], profile(settings.kafka_bootstrap)))[topic]
    if end == 0:
        return []
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


async def lifecycle(settings, store: JobStore, publisher: Publisher, clock=utc_now) -> Lifecycle:
    dead = DeadLetters(settings, publisher, Counter())
    running = Lifecycle(
        settings, profile(settings.kafka_bootstrap), store, publisher, settings.policy(), dead, clock
    )
    await running.adopt(PARTITION)
    return running


def store_of(memory: MemoryStore | None = None) -> JobStore:
    return JobStore(memory or MemoryStore(), load_settings().policy())


async def handle(running: Lifecycle, command, at=None):
    return await running.handle_batch([Incoming(PARTITION, command, at or utc_now())])


async def test_crash_after_publishing_consequences_appends_the_events_once_on_redelivery(settings):
    command = submit(deadline_at=utc_now() + timedelta(hours=1))
    store = store_of()
    crashing = CrashingPublisher(settings.kafka_access, crash_on_batch=2)
    await crashing.start()
    at = utc_now()
    try:
        with pytest.raises(SimulatedCrashError):
            await handle(await lifecycle(settings, store, crashing), command, at)
    finally:
        await crashing.stop()
    publisher = Publisher(settings.kafka_access, profile(settings.kafka_bootstrap))
    await publisher.start()
    try:
        restarted = await lifecycle(settings, store, publisher)
        await handle(restarted, command, at)
    finally:
        await publisher.stop()
    events = await read_all(settings, "events")
    assert [type(e).__name__ for e in events] == ["JobAccepted"]
    due = await read_all(settings, "due")
    # The consequence is published again, with the same fencing token: duplicates, never loss.
    assert len(due) == 2
    assert due[0] == due[1]


async def test_crash_after_appending_events_is_healed_from_the_log_and_the_redelivery_adds_nothing(settings):
    command = submit(deadline_at=utc_now() + timedelta(hours=1))
    memory = CrashingStore()
    publisher = Publisher(settings.kafka_access, profile(settings.kafka_bootstrap))
    await publisher.start()
    try:
        with pytest.raises(SimulatedCrashError):
            await handle(await lifecycle(settings, store_of(memory), publisher), command)
        restarted = await lifecycle(settings, store_of(memory), publisher)
        assert await handle(restarted, command) == []
        job = store_of(memory).load_job(submission_identity(command)[0])
        assert job.status is JobStatus.LEASED
    finally:
        await publisher.stop()
    events = await read_all(settings, "events")
    assert [type(e).__name__ for e in events] == ["JobAccepted"]
    assert len(await read_all(settings, "due")) == 1


async def test_a_batch_retried_after_a_store_failure_appends_no_second_copy_even_later(settings):
    """The retry decides at the command record's time, after folding what the failed try appended."""
    command = submit(deadline_at=utc_now() + timedelta(hours=1))
    memory = CrashingStore()
    later = [utc_now()]
    publisher = Publisher(settings.kafka_access, profile(settings.kafka_bootstrap))
    await publisher.start()
    try:
        running = await lifecycle(settings, store_of(memory), publisher, clock=lambda: later[0])
        records = [
            CommandRecord(
                settings.topic("commands"),
                PARTITION,
                0,
                b"k",
                encode(command),
                int(utc_now().timestamp() * 1000),
            )
        ]
        with pytest.raises(SimulatedCrashError):
            await running.handle(records)
        later[0] = utc_now() + timedelta(minutes=5)
        await running.recover(records)
        await running.handle(records)
    finally:
        await publisher.stop()
    events = await read_all(settings, "events")
    assert [type(e).__name__ for e in events] == ["JobAccepted"]
    assert len({e.event_id for e in events}) == 1


async def test_a_worker_whose_partition_was_revoked_appends_nothing(settings):
    publisher = Publisher(settings.kafka_access, profile(settings.kafka_bootstrap))
    await publisher.start()
    try:
        running = await lifecycle(settings, store_of(), publisher)
        await running.assigned({TopicPartition(settings.topic("commands"), PARTITION)}, Revoked())
        assert await handle(running, submit(deadline_at=utc_now() + timedelta(hours=1))) == []
    finally:
        await publisher.stop()
    assert await read_all(settings, "events") == []


async def test_a_worker_with_an_empty_store_rebuilds_jobs_from_the_log(settings):
    publisher = Publisher(settings.kafka_access, profile(settings.kafka_bootstrap))
    await publisher.start()
    try:
        first_store = store_of()
        command = submit(deadline_at=utc_now() + timedelta(hours=1))
        await handle(await lifecycle(settings, first_store, publisher), command)
        leased = first_store.load_job(submission_identity(command)[0])
        taking_over = await lifecycle(settings, store_of(), publisher)
        attempt = Attempt(
            attempt_number=leased.lease.attempt_number,
            lease_id=leased.lease.lease_id,
            route=TransportRoute.DIRECT,
            outcome=AttemptOutcome.FETCHED,
            trust=ArtifactTrust.VERIFIED,
            finished_at=utc_now(),
        )
        events = await handle(taking_over, report(leased, attempt))
    finally:
        await publisher.stop()
    assert [type(e).__name__ for e in events] == ["JobSucceeded"]
    assert [e.sequence for e in events] == [2]


async def test_events_another_writer_appended_in_between_are_folded_from_the_log_first_one_winning(settings):
    publisher = Publisher(settings.kafka_access, profile(settings.kafka_bootstrap))
    await publisher.start()
    command = submit(deadline_at=utc_now() + timedelta(hours=1))
    try:
        mine, theirs = store_of(), store_of()
        # Both believe they own the partition: each decides the same submission at a different time.
        first = await lifecycle(settings, theirs, publisher)
        second = await lifecycle(settings, mine, publisher)
        await handle(first, command, utc_now())
        await handle(second, command, utc_now() + timedelta(seconds=1))
    finally:
        await publisher.stop()
    events = await read_all(settings, "events")
    assert [e.sequence for e in events] == [1, 1]
    job_id = submission_identity(command)[0]
    # The second writer noticed the first one's records and folded the log: both agree with it.
    assert mine.events_of(job_id) == events[:1] == theirs.events_of(job_id)
    assert mine.duplicates_ignored == 1
