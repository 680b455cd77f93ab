"""Intake: public input on the submit topic becomes commands keyed by job id, or dead input.

Any record, whatever it holds, becomes exactly one of the two (dead input with its answer, which
a forwarded command gets once decided: `streams/runtime/answers.py`): a failure to decode, to verify
or to translate it is the record's, and routes it to dead input with the reason. With auth on,
a command must carry a valid signature for this topic and deployment, a command id and an expiry
at most `MAX_COMMAND_VALIDITY` away, and who is asking (the submitter of a job, the actor of a
mutation) is the verified principal, whatever the record's body says. Every command's id is
hashed into its sender's namespace (`public_command_id`), so no record can name an internal
command's id or another principal's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import cast, get_args
from uuid import UUID, uuid5

import msgspec

from projections.lifecycle.identity import public_command_id
from projections.lifecycle.monitors import reserved_key_problem
from projections.lifecycle.state import MAX_COMMAND_VALIDITY
from schemas.codec import decode_as, registry_id
from schemas.commands import (
    CancelJob,
    CreateMonitor,
    DeleteJobHistory,
    DeleteMonitor,
    EditMonitor,
    PauseMonitor,
    RedriveJob,
    ReplayCallback,
    ReportRemoteAttempt,
    ResumeMonitor,
    SubmitJob,
)
from schemas.enums import ActorRole
from schemas.errors import CodecError, ScrapestreamError
from schemas.types import uuid_text
from streams.agents.consequence_records import target_job
from streams.auth.principals import Principal, Principals
from streams.auth.signing import Binding, claimed_principal, verify
from streams.broker.headers import Headers
from streams.runtime import trace_context
from streams.runtime.answers import AnswerAddress, dead_answer
from streams.runtime.commit_order import OUTSIDE, Batch
from streams.runtime.consumer import QuietStage, Record
from streams.runtime.deadinput import DeadLetters, UnusableError
from streams.runtime.handover import Handed, LocalStages
from streams.runtime.publisher import Outgoing, Sink, outgoing
from streams.runtime.schema_registry import SchemaRegistry
from streams.settings import Settings

log = logging.getLogger(__name__)
INTAKE_NAMESPACE = UUID("3a0c5a51-96e4-5b8e-8f0e-2f4a3d1f7c90")
PublicCommand = (
    SubmitJob
    | CancelJob
    | RedriveJob
    | DeleteJobHistory
    | ReplayCallback
    | ReportRemoteAttempt
    | CreateMonitor
    | EditMonitor
    | PauseMonitor
    | ResumeMonitor
    | DeleteMonitor
)
# Whether a caller may hold one more monitor (None) or why not; asked of the API's count over every worker.
MonitorQuota = Callable[[Principal, str], Awaitable[str | None]]
PUBLIC_COMMANDS = get_args(PublicCommand)
AUDITED_AS_SENT = (SubmitJob, CreateMonitor, EditMonitor, PauseMonitor, ResumeMonitor, DeleteMonitor)


class Intake(QuietStage):
    name = "intake"

    def __init__(
        self,
        settings: Settings,
        publisher: Sink,
        dead_letters: DeadLetters,
        counters: Counter[str],
        clock: Callable[[], datetime],
        principals: Principals | None = None,
        registry: SchemaRegistry | None = None,
    ) -> None:
        self._settings = settings
        self._registry = registry
        self._principals = principals
        self._publisher = publisher
        self._dead = dead_letters
        self._counters = counters
        self._clock = clock
        self.topics = frozenset({settings.topic("submit")})
        self._commands = settings.topic("commands")
        self.local: LocalStages | None = None  # the worker's consumer, when submissions may skip the topic
        self._quota: MonitorQuota | None = None
        self._quota_set = asyncio.Event()

    def count_monitors_with(self, quota: MonitorQuota) -> None:
        """How a monitor's creation is checked against its caller's quota, once the API can count."""
        self._quota = quota
        self._quota_set.set()

    async def handle(self, records: Sequence[Record], batch: Batch = OUTSIDE) -> None:
        """Forward every usable record as one batch of commands; dead-letter the rest. A command whose
        job's partition this worker holds is handed to its lifecycle instead, and its answer published
        here once decided: with the batch's submit offsets (in one transaction with `exactly_once`)."""
        now = self._clock()
        checked = [(record, self._signer(record)) for record in records]
        if self._registry is not None:  # only a record that verified may cost a registry lookup
            await self._registry.learn(
                record.value for record, signer in checked if not isinstance(signer, str)
            )
        forwards: list[Forward] = []
        usable, published = self._dead.sort_out(
            checked,
            lambda checked: self._translate(*checked, now),
            "submission",
            lambda checked, reason: self._dead_input(*checked, reason, now),
        )
        over_quota: dict[str, str] = {}  # a caller found at its quota is not counted again in the batch
        for (record, signer), forward in usable:
            over = await self._over_quota(forward, signer, over_quota)
            if over is not None:
                published += self._dead_input(record, signer, f"refused: {over}", now)
            else:
                forwards.append(forward)
        handed = [(forward, self._hand_over(forward, now)) for forward in forwards]
        published += [forward.message(now) for forward, local in handed if local is None]
        written = await self._publisher.send_all(published, batch)
        if self.local is not None:
            self.local.published(where for where in written if where.topic == self._commands)
        replies: list[Outgoing] = []
        left: list[Outgoing] = []
        for forward, local in handed:
            if local is None:
                continue
            if await local.taken:
                replies += local.replies
            else:  # its partition moved before it was decided: its new holder reads it
                left.append(forward.message(now))
        if replies or left:
            await self._publisher.send_all([*replies, *left], batch)
        published_first = sum(1 for _, local in handed if local is None)
        self._counters["commands.published"] += published_first
        self._counters["commands.handed_over"] += len(handed) - published_first
        self._counters["commands.handed_back"] += len(left)
        self._counters["intake.records"] += len(records)

    def _hand_over(self, forward: Forward, now: datetime) -> Handed | None:
        if self.local is None:
            return None
        key = uuid_text(forward.job_id).encode()
        return self.local.hand_over(
            self._commands, key, forward.command, int(now.timestamp() * 1000), forward.headers
        )

    def _signer(self, record: Record) -> Principal | str | None:
        """Who signed the record's bytes as sent (None with auth off), or why it is refused: checked
        before anything decodes them, so an unsigned record's body is never read."""
        if self._principals is None:
            return None
        binding = Binding(self._settings.deployment_id, record.topic)
        return verify(self._principals, record.headers, record.value or b"", binding)

    def _translate(self, record: Record, signer: Principal | str | None, now: datetime) -> Forward:
        """The command a record holds; CodecError or UnusableError (why) when it holds none to forward."""
        try:
            return self._command(record, signer, now, AnswerAddress.of_record(record))
        except (CodecError, UnusableError):
            raise
        except RefusedError as exc:
            raise UnusableError(f"refused: {exc}") from exc
        except Exception as exc:  # whatever a hostile record makes fail is that record's fault
            raise UnusableError(f"unusable: {type(exc).__name__}: {exc}") from exc

    def _dead_input(
        self, record: Record, signer: Principal | str | None, reason: str, now: datetime
    ) -> list[Outgoing]:
        address = AnswerAddress.of_record(record)
        if not isinstance(signer, str):
            with contextlib.suppress(CodecError):
                address = address.naming(decode_as(record.value or b"", *PUBLIC_COMMANDS))
            address = replace(address, principal=None if signer is None else signer.name)
        return [
            self._dead.of(record, reason),
            dead_answer(self._settings.topic("answers"), address, reason, now),
        ]

    async def _over_quota(
        self, translated: Forward, signer: Principal | str | None, over: dict[str, str]
    ) -> str | None:
        """Why a monitor's creation would take its caller past the quota, or None."""
        if not isinstance(translated.command, CreateMonitor):
            return None
        caller = translated.command.caller_identity
        if caller in over:
            return over[caller]
        await self._quota_set.wait()
        asking = signer if isinstance(signer, Principal) else Principal(caller, ActorRole.SERVICE)
        if self._quota is None:
            return None
        try:
            refusal = await self._quota(asking, caller)
        except Exception as exc:  # a worker that does not answer the count refuses the record, not the batch
            log.warning("the monitors of %r could not be counted against the quota: %r", caller, exc)
            refusal = "the caller's monitors could not be counted against its quota: send it again"
        if refusal is not None:
            over[caller] = refusal
        return refusal

    def _command(
        self, record: Record, signer: Principal | str | None, now: datetime, address: AnswerAddress
    ) -> Forward:
        if isinstance(signer, str):
            raise RefusedError(signer)
        value = record.value or b""
        schema_id = registry_id(value)
        if self._registry is None and schema_id is not None:
            raise CodecError(
                f"Confluent framing (registry schema id {schema_id}), but this deployment has no schema "
                "registry: publish in single-object encoding, or set SCRAPESTREAM_SCHEMA_REGISTRY_URL"
            )
        command = _public(value)
        address = replace(address.naming(command), principal=None if signer is None else signer.name)
        if signer is not None:
            problem = _validity_problem(command, now)
            if problem is not None:
                raise RefusedError(problem)
            command = _as_signer(command, signer)
            sender = signer.name
        else:
            if command.expires_at is not None and command.expires_at < now:
                raise RefusedError(f"the command expired at {command.expires_at.isoformat()}")
            sender = claimed_principal(record.headers)
        given = command.command_id or uuid5(
            INTAKE_NAMESPACE, f"{record.topic}:{record.partition}:{record.offset}"
        )
        command = msgspec.structs.replace(command, command_id=public_command_id(sender, given))
        if isinstance(command, AUDITED_AS_SENT):  # its audit names the command as its producer sent it
            command = msgspec.structs.replace(command, request_id=str(given))
        # Keyed by the job (or monitor) of the command as forwarded: the one the lifecycle decides.
        job_id = target_job(command)
        headers: Headers = (address.header(),)
        if isinstance(command, SubmitJob) or trace_context.enabled():  # a job's trace starts here
            incoming = trace_context.from_headers(record.headers)
            traced = trace_context.intake(
                incoming, "scrapestream intake", lambda: _attributes(command, job_id)
            )
            if isinstance(command, SubmitJob):
                command = trace_context.submitted_in(command, traced)
            if traced is not None and trace_context.enabled():
                headers = (*headers, *traced.headers())
        return Forward(self._commands, job_id, command, headers)


@dataclass(frozen=True)
class Forward:
    """A command for the lifecycle, keyed by its job, with where its answer goes."""

    topic: str
    job_id: UUID
    command: PublicCommand
    headers: Headers

    def message(self, now: datetime) -> Outgoing:
        return replace(outgoing(self.topic, self.job_id, self.command, at=now), headers=self.headers)


def _attributes(command: PublicCommand, job_id: UUID) -> dict[str, str]:
    if isinstance(command, SubmitJob):
        return trace_context.job_attributes(job_id, command.caller_identity, command.job_type)
    return {"scrapestream.job.id": str(job_id), "scrapestream.command": type(command).__name__}


def _public(value: bytes) -> PublicCommand:
    """The public command a record holds; `RefusedError` for a submission under a reserved key."""
    command = cast(PublicCommand, decode_as(value, *PUBLIC_COMMANDS))
    reserved = reserved_key_problem(command.idempotency_key) if isinstance(command, SubmitJob) else None
    if reserved is not None:
        raise RefusedError(reserved)
    return command


def _validity_problem(command: PublicCommand, now: datetime) -> str | None:
    """Why a signed command may not be decided: no id, no expiry, expired, or valid too long."""
    if command.command_id is None:
        return "a signed command needs a command_id"
    if command.expires_at is None:
        return "a signed command needs expires_at"
    if command.expires_at < now:
        return f"the command expired at {command.expires_at.isoformat()}"
    if command.expires_at > now + MAX_COMMAND_VALIDITY:
        return f"expires_at is more than {MAX_COMMAND_VALIDITY} away: the longest a signed command is valid"
    return None


class RefusedError(ScrapestreamError):
    """A record intake will not forward: unsigned or badly signed while auth is on."""


def _as_signer(command: PublicCommand, signer: Principal) -> PublicCommand:
    if isinstance(command, ReportRemoteAttempt):
        if command.job_type not in signer.runs:
            raise RefusedError(f"principal {signer.name} may not run job type {command.job_type[:64]!r}")
        return command
    if isinstance(command, SubmitJob | CreateMonitor):
        return msgspec.structs.replace(command, submitted_by=signer.name, submitter_role=signer.role)
    return msgspec.structs.replace(command, actor_id=signer.name, actor_role=signer.role)
