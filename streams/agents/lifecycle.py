"""The lifecycle agent: the only writer of the events topic.

Each batch of commands is handled in four ordered steps, so a crash at any point loses nothing and
a redelivered command adds nothing (its id is in the job's state once its events are):
1. `decide` on the job's state;
2. publish what follows (due work, completion, callback) and wait for acks;
3. append the events to the job's partition of the events topic and wait for acks;
4. fold the events into the local store with the events offset reached, atomically.
A crash after 2 republishes the consequences on redelivery (duplicates, never loss).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime
from uuid import UUID

from aiokafka import AIOKafkaConsumer, TopicPartition

from projections.jobstore import JobStore, decode_event
from projections.lifecycle import Policy, decide, replay
from projections.lifecycle.consequences import consequences_of
from projections.lifecycle.identity import host_of
from projections.lifecycle.state import Job
from projections.lifecycle.submission import submission_identity
from schemas.commands import Command, SubmitJob
from schemas.events import Event
from streams.broker.compat import BrokerProfile, end_offsets
from streams.publisher import Outgoing, Sink, outgoing
from streams.settings import Settings

log = logging.getLogger(__name__)
CATCH_UP_BATCH = 500


def target_job(command: Command) -> UUID:
    return submission_identity(command)[0] if isinstance(command, SubmitJob) else command.job_id


class Lifecycle:
    def __init__(
        self,
        settings: Settings,
        profile: BrokerProfile,
        store: JobStore,
        publisher: Sink,
        policy: Policy,
        clock: Callable[[], datetime],
    ) -> None:
        self._settings = settings
        self._profile = profile
        self._store = store
        self._publisher = publisher
        self._policy = policy
        self._clock = clock

    async def handle(self, partition: int, command: Command) -> list[Event]:
        return await self.handle_batch([(partition, command)])

    async def handle_batch(self, commands: Sequence[tuple[int, Command]]) -> list[Event]:
        """Handle commands in order; one publish round per step for the whole batch."""
        decided: dict[int, list[Event]] = defaultdict(list)
        consequences: list[Outgoing] = []
        states: dict[UUID, Job | None] = {}
        now = self._clock()
        # Step 1
        for partition, command in commands:
            job_id = target_job(command)
            state = states[job_id] if job_id in states else self._store.load(job_id)
            events = decide(state, command, now, self._policy)
            states[job_id] = replay(events, state)
            if events:
                decided[partition] += events
                consequences += self._consequences(states[job_id], events)
        if not decided:
            return []
        # Step 2
        await self._publisher.send_all(consequences)
        # Step 3
        topic = self._settings.topic("events")
        appended = [
            (partition, outgoing(topic, str(event.job_id), event, partition=partition))
            for partition, events in decided.items()
            for event in events
        ]
        written = await self._publisher.send_all([message for _, message in appended])
        # Step 4
        next_offsets = {
            partition: meta.offset + 1 for (partition, _), meta in zip(appended, written, strict=True)
        }
        for partition, events in decided.items():
            self._store.commit(partition, events, next_offset=next_offsets[partition])
        return [event for events in decided.values() for event in events]

    def _consequences(self, state: Job | None, events: list[Event]) -> list[Outgoing]:
        if state is None:
            return []
        result = consequences_of(state, events, self._policy)
        topic = self._settings.topic
        return [
            *(outgoing(topic("due"), host_of(work.request.url), work) for work in result.due),
            *(outgoing(topic("completions"), str(c.job_id), c) for c in result.completions),
            *(outgoing(topic("outbox"), str(c.job_id), c) for c in result.callbacks),
        ]

    async def catch_up(self, partition: int) -> int:
        """Fold events of `partition` this store has not seen (written before a crash or elsewhere)."""
        events_partition = TopicPartition(self._settings.topic("events"), partition)
        start = self._store.events_offset(partition)
        end = (await end_offsets(self._settings.kafka_bootstrap, [events_partition], self._profile))[
            events_partition
        ]
        if start >= end:
            return 0
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._settings.kafka_bootstrap,
            enable_auto_commit=False,
            fetch_max_wait_ms=50,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        folded = 0
        try:
            consumer.assign([events_partition])
            consumer.seek(events_partition, start)
            # The consumer's position, not the last offset seen, so a gap left by retention cannot stall this.
            while await consumer.position(events_partition) < end:
                batch = await consumer.getmany(events_partition, timeout_ms=500, max_records=CATCH_UP_BATCH)
                records = batch.get(events_partition, [])
                if records:
                    events = [decode_event(record.value) for record in records]
                    self._store.commit(partition, events, next_offset=records[-1].offset + 1)
                    folded += len(records)
        finally:
            await consumer.stop()
        log.info("partition %d: folded %d events written before this worker took it", partition, folded)
        return folded
