"""The lifecycle agent: the only writer of the events topic.

Each batch of commands is handled in four ordered steps, so a crash at any point loses nothing and
a redelivered command adds nothing (its id is in the job's state once its events are):
1. `decide` on the job's state, at the time of the command's record;
2. publish what follows (due work, completion, callback) and wait for acks; the worker's own
   cache table takes the batch's cache entries first, so no completion it publishes is ahead of
   the entry its attempt made (another worker reads it within one fetch wait of its table);
3. append the events of the partitions this worker still owns and wait for acks;
4. fold the events into the local store with the events offset reached, atomically; when the
   log holds records of another writer in between, fold from the log instead (first one wins).
A crash after 2 republishes the consequences on redelivery (duplicates, never loss). A failed
batch is retried only after the store caught up with the log (`recover`). With `exactly_once`
steps 2 and 3 are one transaction with the commands offset, and step 4 waits for its commit
(its `Batch`'s `after_commit`): the store never holds what an aborted batch decided.
The partitions it decides are caught up first (`catch_up.PartitionCatchUp`); what the HTTP API may
wait for (a decision, a batch folded) it tells `runtime.decisions.Decisions`, which the API holds.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import cast, get_args
from uuid import UUID

from aiokafka import TopicPartition

from projections.jobstore import JobStore
from projections.lifecycle.answers import decision_of
from projections.lifecycle.decide import decide
from projections.lifecycle.emit import command_id_of
from projections.lifecycle.evolve import replay
from projections.lifecycle.mutations import refusal_of
from projections.lifecycle.policy import Policy
from projections.lifecycle.state import State, accepted_job
from schemas.codec import decode_as
from schemas.commands import (
    Command,
    RecordAudit,
    ReportRemoteAttempt,
    SubmitJob,
)
from schemas.events import Event
from schemas.work import DueWork
from streams.agents.catch_up import PartitionCatchUp
from streams.agents.consequence_records import ConsequenceRecords, target_job
from streams.agents.decision_spans import carried, decision_span, job_trace
from streams.agents.remote import RemoteResults
from streams.broker.compat import BrokerProfile
from streams.readers.fleet import Capabilities
from streams.runtime import trace_context
from streams.runtime.answers import AnswerAddress, answer, dead_answer
from streams.runtime.commit_order import OUTSIDE, Batch
from streams.runtime.consumer import PartitionControl, QuietStage, Record
from streams.runtime.deadinput import DeadLetters
from streams.runtime.decisions import Decisions
from streams.runtime.flusher import Flusher
from streams.runtime.handover import Handover
from streams.runtime.local_records import LocalRecord
from streams.runtime.publisher import Outgoing, Sink, outgoing
from streams.runtime.trace_context import TraceContext
from streams.settings import Settings

log = logging.getLogger(__name__)
COMMAND_TYPES = get_args(Command)
RECEIVED_TYPES = (*COMMAND_TYPES, ReportRemoteAttempt)  # a remote report becomes a ReportAttempt here


def _command_of(record: Record) -> Command | ReportRemoteAttempt:
    if isinstance(record, LocalRecord):  # handed over by another stage of this worker: decoded already
        return cast(Command, record.decoded)
    return cast(Command | ReportRemoteAttempt, decode_as(record.value or b"", *RECEIVED_TYPES))


def _replied(record: Record | None, messages: list[Outgoing]) -> list[Outgoing]:
    """`messages` for this batch to publish, or, for a record handed over, for its sender to publish
    with its own input (intake: the answer commits with the submit offset)."""
    if isinstance(record, LocalRecord):
        record.replies += messages
        return []
    return messages


def _record_trace(record: Record | None) -> TraceContext | None:
    return None if record is None or not record.headers else trace_context.from_headers(record.headers)


def _traced(item: Incoming, job_id: UUID) -> Command:
    """With tracing on, a submission made inside the deployment (a monitor's check) goes on in its
    record's trace, or starts one, as intake gives every submission from outside."""
    command = item.command
    if not isinstance(command, SubmitJob) or command.traceparent is not None or not trace_context.enabled():
        return command
    context = trace_context.intake(
        _record_trace(item.record),
        "scrapestream intake",
        lambda: trace_context.job_attributes(job_id, command.caller_identity, command.job_type),
    )
    return trace_context.submitted_in(command, context)


@dataclass(frozen=True)
class Incoming:
    """A command and where it came from: its partition, its record (for dead input) and its time."""

    partition: int
    command: Command
    at: datetime
    record: Record | None = None
    answer_to: AnswerAddress | None = None  # a command from the submit topic: its producer's answer


class Lifecycle(QuietStage):
    name = "lifecycle"

    def __init__(
        self,
        settings: Settings,
        profile: BrokerProfile,
        store: JobStore,
        publisher: Sink,
        policy: Policy,
        dead_letters: DeadLetters,
        clock: Callable[[], datetime],
        observe: Callable[[Sequence[Event]], None] | None = None,
        restore: Callable[[int], Awaitable[bool]] | None = None,
        cache_entries: Callable[[Iterable[tuple[bytes, bytes | None]]], None] | None = None,
        disabled: Callable[[], Mapping[str, str]] | None = None,
        runners: Callable[[], Capabilities | None] | None = None,
        remote: RemoteResults | None = None,
        counters: Counter[str] | None = None,
    ) -> None:
        self._settings = settings
        self._profile = profile
        self._observe = observe
        self._restore = restore
        self._cache_entries = cache_entries
        self.decisions = Decisions()  # what the HTTP API waits for
        self.due = Handover(Flusher(publisher), "due", counters)  # due work for this worker's executor
        self.partitions = PartitionCatchUp(settings, profile, store, restore)
        self._store = store
        self._unfolded: dict[int, dict[UUID, State]] = {}  # decided in a transaction still open, by partition
        self._publisher = publisher
        self._policy = policy
        self._disabled = disabled  # the job types switched off right now (the controls topic)
        self._runners = runners  # what running workers' executors run, once known
        self._runners_seen: Capabilities | None = None
        self._remote = remote  # reports of remotely run types become attempts here
        self._outgoing = ConsequenceRecords(settings, None if remote is None else remote.uploads)
        self._dead = dead_letters
        self._clock = clock
        self.topics = frozenset({settings.topic("commands")})
        self._leaving = (settings.topic("completions"), settings.topic("outbox"))  # carry a job's trace out

    @property
    def owned(self) -> list[int]:
        return self.partitions.owned

    async def assigned(self, partitions: set[TopicPartition], control: PartitionControl) -> None:
        await self.partitions.assigned(partitions, control)

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        await self.partitions.revoked(partitions)

    async def close(self) -> None:
        await self.partitions.close()
        await self.due.close()

    async def adopt(self, partition: int) -> None:
        await self.partitions.adopt(partition)

    def takes_over(self, partition: int) -> bool:
        return self.partitions.keeps(partition)

    def _decided(self, events: Sequence[Event]) -> None:
        if self._observe is not None:
            self._observe(events)
        self.decisions.folded(events)

    async def handle(self, records: Sequence[Record], batch: Batch = OUTSIDE) -> None:
        incoming: list[Incoming] = []
        kept = [record for record in records if self._kept(record)]
        usable, dead = self._dead.sort_out(kept, _command_of, "command", self._dead_input)
        for record, command in usable:
            if isinstance(command, ReportRemoteAttempt):
                reported = (
                    f"job type {command.job_type[:64]!r} is not run remotely on this deployment"
                    if self._remote is None
                    else await self._remote.command_of(command, self._store.load_job(command.job_id))
                )
                if isinstance(reported, str):
                    dead += self._dead_input(record, reported)
                    continue
                command = reported
            at = self._record_time(record)
            incoming.append(Incoming(record.partition, command, at, record, AnswerAddress.of_command(record)))
        await self.handle_batch(incoming, dead, batch)

    def _kept(self, record: Record) -> bool:
        if isinstance(record, LocalRecord):
            record.replies.clear()  # a retried batch replies anew
        if self.partitions.keeps(record.partition):
            return True
        if isinstance(record, LocalRecord):
            record.settle(False)  # its sender publishes it for the new owner
        return False  # revoked while queued: the new owner handles it

    def _dead_input(self, record: Record, reason: str) -> list[Outgoing]:
        """A command nobody can decide, and its producer's answer when it came from the submit topic."""
        address = AnswerAddress.of_command(record)
        dead = [self._dead.of(record, reason)]
        if address is not None:
            dead.append(dead_answer(self._settings.topic("answers"), address, reason, self._clock()))
        return _replied(record, dead)

    def _record_time(self, record: Record) -> datetime:
        if record.timestamp is None or record.timestamp < 0:
            return self._clock()
        return datetime.fromtimestamp(record.timestamp / 1000, UTC)

    async def handle_batch(
        self, commands: Sequence[Incoming], dead: Sequence[Outgoing] = (), batch: Batch = OUTSIDE
    ) -> list[Event]:
        """Handle commands in order; one publish round per step for the whole batch."""
        decided: dict[int, list[Event]] = defaultdict(list)
        published: list[Outgoing] = list(dead)
        states: dict[UUID, State] = {}
        traces: dict[UUID, TraceContext] = {}  # the context each job's events go on in
        policy = self._current_policy()  # once a batch: switches and running workers change slowly
        # Step 1
        for item in commands:
            try:
                events, consequences = self._decide(item, states, policy, traces)
            except Exception as exc:  # a command the rules cannot take: dead input, not a wedge
                if item.record is None:
                    raise
                published += self._dead_input(item.record, f"{type(exc).__name__}: {exc}")
                continue
            decided[item.partition] += events
            published += consequences
        if not decided and not published:
            return []
        jobs = Counter({event.job_id for events in decided.values() for event in events})
        ended = self.decisions.publishing(jobs)
        if batch.transactional:  # its next batches decide on these until it commits and folds
            for partition in {item.partition for item in commands}:
                self._unfolded.setdefault(partition, {}).update(states)
                batch.when_ended(functools.partial(self._folded_or_dropped, partition))
        try:
            return await self._publish_append_fold(decided, published, states, traces, batch)
        finally:
            batch.when_ended(ended)  # with a transaction: once it committed and folded, or aborted

    async def _publish_append_fold(
        self,
        decided: dict[int, list[Event]],
        published: list[Outgoing],
        states: dict[UUID, State],
        traces: dict[UUID, TraceContext],
        batch: Batch,
    ) -> list[Event]:
        # Step 2
        if self._cache_entries is not None:  # this worker reads its own entries before any completion
            cache = self._settings.topic("cache")
            self._cache_entries(
                (m.key, None if m.tombstone else m.value) for m in published if m.topic == cache
            )
        local = [
            (m, m.record)
            for m in published
            if isinstance(m.record, DueWork) and self.due.takes(m.topic, m.key)
        ]
        handed = {id(m) for m, _ in local}
        consequences = [m for m in published if id(m) not in handed] if local else published
        if not batch.transactional:  # at least once: the consequences land before the events
            await self._publisher.send_all(consequences)
            consequences = []
        # Step 3 (in a transaction, one round with step 2: both commit, or neither)
        appending = {p: events for p, events in decided.items() if events and self.partitions.may_write(p)}
        topic = self._settings.topic("events")
        appended = [
            (
                partition,
                carried(
                    outgoing(topic, event.job_id, event, partition, event.occurred_at),
                    traces.get(event.job_id),
                ),
            )
            for partition, events in appending.items()
            for event in events
        ]
        sent = await self._publisher.send_all([*consequences, *(message for _, message in appended)], batch)
        written = sent[len(consequences) :]
        # Step 4
        offsets: dict[int, list[int]] = defaultdict(list)
        values: dict[int, list[bytes]] = defaultdict(list)
        for (partition, message), meta in zip(appended, written, strict=True):
            offsets[partition].append(meta.offset)
            values[partition].append(message.value)
        folded = [event for events in appending.values() for event in events]

        async def fold() -> None:  # after the commit: the store never holds an aborted batch
            for partition, events in appending.items():
                end = batch.end_after(topic, partition, offsets[partition][-1])
                await self._fold(partition, events, offsets[partition], values[partition], states, end)
            self._decided(folded)
            for message, work in local:  # this worker's executor reads its partition: no due record
                at = datetime.fromtimestamp((message.timestamp_ms or 0) / 1000, UTC)
                what = f"due work of job {work.job_id}"
                await self.due.deliver(message.topic, message.key, work, at, what, message.headers)

        await batch.after_commit(fold)
        return folded

    def _decide(
        self, item: Incoming, states: dict[UUID, State], policy: Policy, traces: dict[UUID, TraceContext]
    ) -> tuple[list[Event], list[Outgoing]]:
        job_id = target_job(item.command)
        unfolded = self._unfolded.get(item.partition, {})
        if job_id in states:
            state = states[job_id]
        elif job_id in unfolded:
            state = unfolded[job_id]
        else:
            state = self._store.load(job_id)
        refused = refusal_of(state, item.command, item.at)
        if refused is not None:  # the job stays as it is; the actor's audit stream records why
            self.decisions.answer(command_id_of(item.command), refused)
            audited = outgoing(self._settings.topic("commands"), refused.job_id, refused, at=item.at)
            return [], [audited, *self._answered(item, job_id, state, state, [], refused)]
        command = _traced(item, job_id)
        events = decide(state, command, item.at, policy)
        after = replay(events, state)
        job = accepted_job(after)
        kept = None if job is None else job_trace(job.accepted)
        parent = (_record_trace(item.record) or kept) if trace_context.enabled() else kept
        with decision_span(command, events, after, parent) as traced:
            consequences = self._outgoing.of(after, events, state, self._policy) if events else []
            consequences = traced.carrying(consequences, self._leaving)
        if traced.spans and traced.context is not None:
            traces[job_id] = traced.context
        states[job_id] = after
        return events, [*consequences, *self._answered(item, job_id, state, after, events, None)]

    def _folded_or_dropped(self, partition: int) -> None:
        """The open transaction ended: its states are in the store, or it aborted and they are not."""
        self._unfolded.pop(partition, None)

    def _answered(
        self,
        item: Incoming,
        job_id: UUID,
        before: State,
        after: State,
        events: list[Event],
        refused: RecordAudit | None,
    ) -> list[Outgoing]:
        if item.answer_to is None:
            return []
        decided = decision_of(job_id, item.command, before, after, events, refused)
        return _replied(
            item.record, [answer(self._settings.topic("answers"), item.answer_to, decided, item.at)]
        )

    async def _fold(
        self,
        partition: int,
        events: list[Event],
        offsets: list[int],
        values: list[bytes],
        states: dict[UUID, State],
        end: int,
    ) -> None:
        """Into the store, which reads the log on from `end` (past a commit marker after them, if any)."""
        start = self._store.events_offset(partition)
        if offsets == list(range(start, start + len(offsets))):
            self._store.commit(partition, events, end, encoded=values, folded_by_caller=states)
            return
        log.warning(
            "events partition %d holds another writer's records (store at %d, appended at %d): folding it",
            partition,
            start,
            offsets[0],
        )
        await self.partitions.catch_up(partition)

    def _current_policy(self) -> Policy:
        """The deployment's rules, with the job types switched off, and those running workers run, as
        they are now."""
        disabled = self._disabled() if self._disabled is not None else self._policy.disabled_types
        if disabled is not self._policy.disabled_types:
            self._policy = replace(self._policy, disabled_types=disabled)
        seen = None if self._runners is None else self._runners()
        if seen != self._runners_seen:
            self._runners_seen = seen
            runners, cannot_run = (None, {}) if seen is None else (seen.runs, seen.cannot_run)
            self._policy = replace(self._policy, runners=runners, cannot_run=cannot_run)
        return self._policy

    async def recover(self, records: Sequence[Record]) -> None:
        """Before a failed batch is retried, fold whatever of it already reached the log."""
        for partition in sorted({record.partition for record in records} & set(self.partitions.owned)):
            await self.partitions.catch_up(partition)
