"""A Python client: publish submissions and cancellations, follow completions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from uuid import UUID, uuid4

from aiokafka import AIOKafkaConsumer, TopicPartition

from projections.lifecycle.completion import rejection_completion
from projections.lifecycle.submission import submission_identity
from schemas.codec import decode
from schemas.commands import CancelJob, SubmitJob
from schemas.enums import JobStatus
from schemas.errors import ScrapestreamError
from schemas.events import JobCompleted, JobRejected
from streams.broker.compat import BrokerProfile
from streams.publisher import Publisher, outgoing, partition_of


class Client:
    def __init__(self, bootstrap: str, profile: BrokerProfile, topic_prefix: str = "scrapestream") -> None:
        self._bootstrap = bootstrap
        self._profile = profile
        self._prefix = topic_prefix
        self._publisher = Publisher(bootstrap, profile)
        self._submissions: dict[UUID, UUID] = {}

    async def __aenter__(self) -> Client:
        await self._publisher.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self._publisher.stop()

    async def submit(self, command: SubmitJob) -> UUID:
        """Publish a submission; returns the job id it resolves to (`wait_for` follows this submission)."""
        if command.command_id is None:
            command = command.model_copy(update={"command_id": uuid4()})
        job_id, _ = submission_identity(command)
        await self._publisher.send_all([outgoing(f"{self._prefix}.submit", str(job_id), command)])
        self._submissions[job_id] = command.command_id or uuid4()
        return job_id

    async def cancel(self, command: CancelJob) -> None:
        await self._publisher.send_all([outgoing(f"{self._prefix}.submit", str(command.job_id), command)])

    async def completions(self, from_beginning: bool = True) -> AsyncIterator[JobCompleted]:
        """Every completion on the topic, from its start or from now, until the caller stops."""
        consumer = AIOKafkaConsumer(
            f"{self._prefix}.completions",
            bootstrap_servers=self._bootstrap,
            auto_offset_reset="earliest" if from_beginning else "latest",
            enable_auto_commit=False,
            fetch_max_wait_ms=self._profile.fetch_max_wait_ms,
        )
        await consumer.start()
        try:
            async for record in consumer:
                completion = decode(record.value)
                if isinstance(completion, JobCompleted):
                    yield completion
        finally:
            await consumer.stop()

    async def wait_for(self, job_id: UUID) -> JobCompleted:
        """How the submission this client made for `job_id` ended: `REJECTED`, or the job's completion.

        For a job this client did not submit, the first completion published for it. Reads only the
        job's partition of the completions and events topics, from their start, so an outcome
        published before this call is found too.
        """
        submission = self._submissions.get(job_id)
        key = str(job_id).encode()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            enable_auto_commit=False,
            fetch_max_wait_ms=self._profile.fetch_max_wait_ms,
        )
        await consumer.start()
        try:
            await consumer.topics()
            partitions = [
                self._partition_of(consumer, f"{self._prefix}.{name}", key)
                for name in ("completions", "events")
            ]
            consumer.assign(partitions)
            for partition in partitions:
                consumer.seek(partition, 0)
            async for record in consumer:
                if record.key != key:
                    continue
                outcome = decode(record.value)
                if isinstance(outcome, JobRejected) and outcome.command_id == submission:
                    return rejection_completion(outcome)
                # A submission that was not rejected ends with the job's one other completion.
                if isinstance(outcome, JobCompleted) and (
                    submission is None or outcome.status is not JobStatus.REJECTED
                ):
                    return outcome
        finally:
            await consumer.stop()
        raise AssertionError("unreachable: a consumer never ends")

    @staticmethod
    def _partition_of(consumer: AIOKafkaConsumer, topic: str, key: bytes) -> TopicPartition:
        """The partition Kafka's default partitioner gives `key`, as every scrapestream producer uses."""
        partitions = sorted(consumer.partitions_for_topic(topic) or ())
        if not partitions:
            raise ScrapestreamError(f"topic {topic} does not exist: is a worker running?")
        return TopicPartition(topic, partition_of(key, len(partitions)))
