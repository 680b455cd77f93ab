"""A Python client: publish submissions and mutations (signed when given a key), follow outcomes."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from types import TracebackType
from typing import Any, TypeVar, cast, get_args
from uuid import UUID, uuid4

import msgspec
from aiokafka import AIOKafkaConsumer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from projections.lifecycle.completion import rejection_completion
from projections.lifecycle.identity import public_command_id, refused_job_id_for
from projections.lifecycle.submission import submission_identity
from schemas.codec import decode_or_none
from schemas.commands import CancelJob, DeleteJobHistory, RedriveJob, SubmitJob
from schemas.enums import JobStatus
from schemas.errors import ScrapestreamError
from schemas.events import Event, JobAccepted, JobCompleted, JobRejected, SubmissionReused
from schemas.types import Record
from schemas.work import SubmissionAnswer
from streams.auth.signing import Binding, private_key_from_text, sign
from streams.broker.access import KafkaAccess
from streams.broker.compat import BrokerProfile, refresh_metadata, start_whole
from streams.broker.refusals import admitted
from streams.clock import utc_now
from streams.errors import BrokerError
from streams.readers.topic_reads import TopicReads, partition_of_key, partitions_of
from streams.runtime.publisher import Outgoing, Publisher, Written, outgoing
from streams.runtime.schema_registry import SchemaRegistry

T = TypeVar("T")
C = TypeVar("C", SubmitJob, CancelJob, RedriveJob, DeleteJobHistory)


class Submission(StrEnum):
    """What a submission did: started a job, joined an existing one, or was refused."""

    CREATED = "created"
    REUSED = "reused"
    REJECTED = "rejected"


Decided = JobAccepted | SubmissionReused | JobRejected
OUTCOMES: dict[type, Submission] = {
    JobAccepted: Submission.CREATED,
    SubmissionReused: Submission.REUSED,
    JobRejected: Submission.REJECTED,
}
EVENT_TYPES = get_args(Event)


@dataclasses.dataclass(frozen=True)
class Signer:
    """Who signs this client's commands, for a worker with auth on: a principal, its signing key (an
    Ed25519 key, or the base64 text `scrapestream principal new` prints) and the deployment's
    `SCRAPESTREAM_DEPLOYMENT_ID`. Each signed command gets an id and expires `valid_for` later."""

    principal: str
    key: Ed25519PrivateKey | str
    deployment: str = ""
    valid_for: timedelta = timedelta(minutes=5)

    @property
    def private_key(self) -> Ed25519PrivateKey:
        return private_key_from_text(self.key) if isinstance(self.key, str) else self.key


def _answers(answer: SubmissionAnswer, written: Written) -> bool:
    return (answer.source_partition, answer.source_offset) == (written.partition, written.offset)


def _rejection_of(submission: UUID | None) -> Callable[[Any], JobCompleted | None]:
    def rejected(record: Any) -> JobCompleted | None:
        if isinstance(record, JobRejected) and record.command_id == submission:
            return rejection_completion(record)
        return None

    return rejected


class Client:
    def __init__(
        self,
        kafka: KafkaAccess,
        profile: BrokerProfile,
        topic_prefix: str = "scrapestream",
        signer: Signer | None = None,
        schema_registry: SchemaRegistry | None = None,
    ) -> None:
        self._kafka = kafka
        self._registry = schema_registry  # a deployment with one writes what consumers read in its framing
        self._profile = profile
        self._prefix = topic_prefix
        self._signer = signer
        self._publisher: Publisher | None = None  # made where it runs: a producer needs the event loop
        self._entered = False
        self._reads = TopicReads(kafka, profile, topic_prefix, schema_registry)
        self._written: list[Written] = []  # where the last publish put its records
        self._submissions: dict[UUID, UUID] = {}  # job id -> the id its submission is decided under
        self._refused_streams: dict[UUID, UUID] = {}

    async def __aenter__(self) -> Client:
        if not await admitted(self._kafka):
            raise BrokerError(f"cannot reach Kafka at {self._kafka.bootstrap}: no broker answered")
        self._entered = True
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self._reads.stop()
        if self._publisher is not None:
            await self._publisher.stop()
        if self._registry is not None:
            await self._registry.close()

    async def submit(self, command: SubmitJob) -> UUID:
        """Publish a submission; returns the job id it resolves to (`wait_for` follows this submission)."""
        ((job_id, _),) = await self.submit_all([command])
        return job_id

    async def submit_answered(
        self, command: SubmitJob, timeout_s: float
    ) -> tuple[UUID, SubmissionAnswer | None]:
        """Publish a submission and wait for its answer on the answers topic (None if none came within
        `timeout_s`): created, reused, rejected, or refused as dead input (unsigned, say)."""
        consumer = self._reads.consumer()
        try:
            await start_whole(consumer.start, consumer.stop)
            await refresh_metadata(consumer)
            answers = partitions_of(consumer, f"{self._prefix}.answers")
            consumer.assign(answers)
            await consumer.seek_to_end(*answers)
            for partition in answers:
                await consumer.position(partition)  # fixed now: the answer comes after
            job_id, written = await self._submit_one(command)
            try:
                async with asyncio.timeout(timeout_s):
                    async for record in self._reads.records(consumer):
                        answer = decode_or_none(record.value)
                        if isinstance(answer, SubmissionAnswer) and _answers(answer, written):
                            return job_id, answer
            except TimeoutError:
                return job_id, None
        finally:
            await consumer.stop()
        raise AssertionError("unreachable: a consumer never ends")

    async def _submit_one(self, command: SubmitJob) -> tuple[UUID, Written]:
        ((job_id, _),) = await self.submit_all([command])
        return job_id, self._written[-1]

    async def submit_all(self, commands: Sequence[SubmitJob]) -> list[tuple[UUID, UUID]]:
        """Publish submissions together; for each, in order, the job id it resolves to and the command
        id its decision (`JobAccepted`, `SubmissionReused` or `JobRejected`) carries."""
        messages: list[Outgoing] = []
        sent: list[tuple[UUID, UUID]] = []
        for given in commands:
            command = self._stamped(given)
            job_id, key = submission_identity(command)
            messages.append(self._message(job_id, command))
            decided_as = public_command_id(self._sender, command.command_id or uuid4())
            self._submissions[job_id] = decided_as
            if self._signer is not None and self._signer.principal != command.caller_identity:
                # Refused (a service submitting as another caller), it is decided in this signer's stream.
                refused = refused_job_id_for(self._signer.principal, command.caller_identity, key)
                self._refused_streams[job_id] = refused
            sent.append((job_id, decided_as))
        await self._publish(messages)
        return sent

    async def cancel(self, command: CancelJob) -> None:
        await self._send(command.job_id, self._stamped(command))

    async def redrive(self, command: RedriveJob) -> None:
        await self._send(command.job_id, self._stamped(command))

    async def delete_history(self, command: DeleteJobHistory) -> None:
        await self._send(command.job_id, self._stamped(command))

    @property
    def _sender(self) -> str:
        return "" if self._signer is None else self._signer.principal

    def _stamped(self, command: C) -> C:
        """The command with an id, and an expiry when it is signed."""
        update: dict[str, Any] = {}
        if command.command_id is None:
            update["command_id"] = uuid4()
        if self._signer is not None and command.expires_at is None:
            update["expires_at"] = utc_now() + self._signer.valid_for
        return msgspec.structs.replace(command, **update) if update else command

    async def _send(self, job_id: UUID, command: Record) -> None:
        await self._publish([self._message(job_id, command)])

    def _message(self, job_id: UUID, command: Record) -> Outgoing:
        topic = f"{self._prefix}.submit"
        message = outgoing(topic, str(job_id), command)
        if self._signer is not None:
            binding = Binding(self._signer.deployment, topic)
            headers = sign(self._signer.principal, self._signer.private_key, message.value, binding)
            message = dataclasses.replace(message, headers=tuple(headers))
        return message

    async def _publish(self, messages: list[Outgoing]) -> None:
        if not self._entered:
            raise ScrapestreamError("use the client in `async with Client(...) as client:`")
        if self._publisher is None:  # started at the first publish: a client that only reads never writes
            publisher = Publisher(self._kafka, self._profile)
            await publisher.start()
            self._publisher = publisher
        self._written = await self._publisher.send_all(messages)

    @contextlib.asynccontextmanager
    async def outcomes(self, completions: bool) -> AsyncIterator[AsyncIterator[Decided | JobCompleted]]:
        """Decisions on the submissions published once this is entered, and, when `completions`,
        every completion from the topic's start; read until the caller leaves."""
        consumer = self._reads.consumer()
        try:
            await start_whole(consumer.start, consumer.stop)
            await refresh_metadata(consumer)
            events = partitions_of(consumer, f"{self._prefix}.events")
            done = partitions_of(consumer, f"{self._prefix}.completions") if completions else []
            consumer.assign(events + done)
            await consumer.seek_to_end(*events)
            for partition in events:
                await consumer.position(partition)  # fixed now: nothing published later is missed
            if done:
                await consumer.seek_to_beginning(*done)
            yield self._outcomes_of(consumer)
        finally:
            await consumer.stop()

    async def _outcomes_of(self, consumer: AIOKafkaConsumer) -> AsyncIterator[Decided | JobCompleted]:
        async for record in self._reads.records(consumer):
            found = decode_or_none(record.value)
            if type(found) in OUTCOMES or isinstance(found, JobCompleted):
                yield cast(Decided | JobCompleted, found)

    async def completions(
        self, from_beginning: bool = True, since: datetime | None = None
    ) -> AsyncGenerator[JobCompleted, None]:
        """Every completion on the topic, until the caller stops: from the completions published at or
        after `since` when it is given, else from the topic's start (or from now)."""
        topic = f"{self._prefix}.completions"
        consumer = self._reads.consumer(auto_offset_reset="earliest" if from_beginning or since else "latest")
        try:
            await start_whole(consumer.start, consumer.stop)
            await refresh_metadata(consumer)
            partitions = partitions_of(consumer, topic)
            consumer.assign(partitions)
            if since is not None:
                await self._reads.seek_to_time(consumer, partitions, since)
            elif from_beginning:
                await consumer.seek_to_beginning(*partitions)
            else:
                await consumer.seek_to_end(*partitions)
            async for record in self._reads.records(consumer):
                completion = decode_or_none(record.value)
                if isinstance(completion, JobCompleted):
                    yield completion
        finally:
            await consumer.stop()

    async def submission(self, job_id: UUID) -> Submission:
        """Whether this client's submission for `job_id` created the job, reused it, or was rejected."""
        return self.submission_of(await self.decision(job_id))

    @staticmethod
    def submission_of(decided: Decided) -> Submission:
        return OUTCOMES[type(decided)]

    async def decision(self, job_id: UUID) -> Decided:
        """The event that decided this client's submission for `job_id`: `JobAccepted`,
        `SubmissionReused` or `JobRejected` (with its reason)."""
        command_id = self._submissions.get(job_id)
        if command_id is None:
            raise ScrapestreamError(f"this client made no submission for job {job_id}")

        def decided(record: Any) -> Decided | None:
            if getattr(record, "command_id", None) != command_id or type(record) not in OUTCOMES:
                return None
            found: Decided = record
            return found

        return await self._reads.first(self._streams_of(job_id), ("events",), decided)

    async def follow(self, job_id: UUID) -> AsyncGenerator[Event, None]:
        """The job's events as they are appended, from its first, until the caller stops."""
        key = str(job_id).encode()
        consumer = self._reads.consumer()
        try:
            await start_whole(consumer.start, consumer.stop)
            await refresh_metadata(consumer)
            if not consumer.partitions_for_topic(f"{self._prefix}.events"):
                return  # a principal the cluster lets read no events (the `producer` role): nothing to follow
            partition = partition_of_key(consumer, f"{self._prefix}.events", key)
            consumer.assign([partition])
            consumer.seek(partition, 0)
            async for record in self._reads.records(consumer):
                if record.key == key:
                    event = decode_or_none(record.value)
                    if isinstance(event, EVENT_TYPES):
                        yield cast(Event, event)
        finally:
            await consumer.stop()

    async def wait_for(self, job_id: UUID) -> JobCompleted:
        """How the submission this client made for `job_id` ended: `REJECTED`, or the job's completion.

        For a job this client did not submit, the first completion published for it.
        """
        submission = self._submissions.get(job_id)
        # Decided first when it may be refused: then its answer is in this signer's stream, not the job's.
        maybe_refused = submission is not None and job_id in self._refused_streams
        if maybe_refused and await self.submission(job_id) is Submission.REJECTED:
            return await self._reads.first(self._streams_of(job_id), ("events",), _rejection_of(submission))

        rejection = _rejection_of(submission)

        def ended(record: Any) -> JobCompleted | None:
            if submission is not None and (rejected := rejection(record)) is not None:
                return rejected
            # A submission that was not rejected ends with the job's one other completion.
            if isinstance(record, JobCompleted) and (
                submission is None or record.status is not JobStatus.REJECTED
            ):
                return record
            return None

        return await self._reads.first((job_id,), ("completions", "events"), ended)

    def _streams_of(self, job_id: UUID) -> tuple[UUID, ...]:
        refused = self._refused_streams.get(job_id)
        return (job_id,) if refused is None else (job_id, refused)
