"""Intake: public input on the submit topic becomes commands keyed by job id, or dead input."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from uuid import UUID, uuid5

from projections.lifecycle.submission import submission_identity
from schemas.codec import decode
from schemas.commands import CancelJob, SubmitJob
from schemas.errors import CodecError
from streams.deadinput import DeadLetters
from streams.publisher import Outgoing, Sink, outgoing
from streams.settings import Settings

INTAKE_NAMESPACE = UUID("3a0c5a51-96e4-5b8e-8f0e-2f4a3d1f7c90")
Message = tuple[int, int, bytes | None, bytes | None]  # partition, offset, key, value


class Intake:
    def __init__(
        self, settings: Settings, publisher: Sink, dead_letters: DeadLetters, counters: Counter[str]
    ) -> None:
        self._settings = settings
        self._publisher = publisher
        self._dead_letters = dead_letters
        self._counters = counters

    async def handle_batch(self, messages: Sequence[Message]) -> None:
        """Forward every usable record as one batch of commands; dead-letter the rest."""
        commands = [command for message in messages if (command := await self._command(message)) is not None]
        await self._publisher.send_all(commands)
        self._counters["intake.commands"] += len(commands)

    async def _command(self, message: Message) -> Outgoing | None:
        topic = self._settings.topic("submit")
        partition, offset, key, value = message
        command_id = uuid5(INTAKE_NAMESPACE, f"{topic}:{partition}:{offset}")
        try:
            record = decode(value or b"")
        except CodecError as exc:
            await self._dead_letters.send(topic, partition, offset, key, value, f"undecodable: {exc}")
            return None
        if isinstance(record, SubmitJob):
            record = record.model_copy(update={"command_id": record.command_id or command_id})
            job_id, _ = submission_identity(record)
        elif isinstance(record, CancelJob):
            record = record.model_copy(update={"command_id": record.command_id or command_id})
            job_id = record.job_id
        else:
            reason = f"{type(record).__name__} is not a SubmitJob or CancelJob"
            await self._dead_letters.send(topic, partition, offset, key, value, reason)
            return None
        return outgoing(self._settings.topic("commands"), str(job_id), record)
