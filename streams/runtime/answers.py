"""Answers on `scrapestream.answers`: one for each record on the submit topic, keyed by its key.

Intake forwards a command with where its answer goes (the internal `scrapestream-answer-to` header);
the lifecycle answers it once decided, and intake answers a record it cannot forward (dead input).
A producer matches its answer by the record's partition and offset, or by the `command_id` it sent
or the `scrapestream-correlation-id` header it set (carried back as a header too) together with the
answer's verified `principal`: another producer may send records that name the same ids.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from uuid import UUID

from projections.lifecycle.answers import Decision
from schemas.enums import AnswerKind
from schemas.types import Record as AvroRecord
from schemas.work import SubmissionAnswer
from streams.runtime.consumer import Record
from streams.runtime.publisher import Outgoing, outgoing

CORRELATION_HEADER = "scrapestream-correlation-id"
ADDRESS_HEADER = "scrapestream-answer-to"
MAX_CORRELATION_BYTES = 256
MAX_KEY_BYTES = 4 * 1024


@dataclass(frozen=True)
class AnswerAddress:
    """Where a submit record's answer goes and what names it for its producer."""

    partition: int
    offset: int
    key: bytes | None = None
    correlation_id: str | None = None
    command_id: UUID | None = None
    command_type: str | None = None
    principal: str | None = None  # who signed the record, verified

    @classmethod
    def of_record(cls, record: Record) -> AnswerAddress:
        found = dict(record.headers or ())
        correlation = found.get(CORRELATION_HEADER)
        return cls(
            record.partition,
            record.offset,
            None if record.key is None else bytes(record.key[:MAX_KEY_BYTES]),
            None if correlation is None else correlation[:MAX_CORRELATION_BYTES].decode("utf-8", "replace"),
        )

    def naming(self, command: AvroRecord) -> AnswerAddress:
        """This address, naming the command the record held (its id as its producer sent it)."""
        command_id = getattr(command, "command_id", None)
        return replace(self, command_id=command_id, command_type=type(command).__name__)

    def header(self) -> tuple[str, bytes]:
        fields: dict[str, Any] = {"p": self.partition, "o": self.offset}
        if self.key is not None:
            fields["k"] = base64.b64encode(self.key).decode()
        if self.correlation_id is not None:
            fields["c"] = self.correlation_id
        if self.command_id is not None:
            fields["i"] = str(self.command_id)
        if self.command_type is not None:
            fields["t"] = self.command_type
        if self.principal is not None:
            fields["s"] = self.principal
        return ADDRESS_HEADER, json.dumps(fields, separators=(",", ":")).encode()

    @classmethod
    def of_command(cls, record: Record) -> AnswerAddress | None:
        """The address intake gave a forwarded command, or None (a command of the shell's own)."""
        raw = dict(record.headers or ()).get(ADDRESS_HEADER)
        if raw is None:
            return None
        try:
            fields = json.loads(raw)
            if not isinstance(fields, dict):
                return None
            key = _text(fields, "k")
            command_id = _text(fields, "i")
            return cls(
                _whole(fields, "p"),
                _whole(fields, "o"),
                None if key is None else base64.b64decode(key, validate=True),
                _text(fields, "c"),
                None if command_id is None else UUID(command_id),
                _text(fields, "t"),
                _text(fields, "s"),
            )
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None  # not intake's: nobody to answer


def _whole(fields: dict[str, Any], name: str) -> int:
    """A whole-number field of the header, or a TypeError (the header is not intake's)."""
    value = fields[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} is a {type(value).__name__}")
    return value


def _text(fields: dict[str, Any], name: str) -> str | None:
    """A text field of the header, or a TypeError (the header is not intake's) for any other value."""
    value = fields.get(name)
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} is a {type(value).__name__}")
    return value


def answer(topic: str, address: AnswerAddress, decision: Decision, at: datetime) -> Outgoing:
    """The answer record for one decided command."""
    return _answer(
        topic,
        address,
        at,
        answer=decision.answer,
        job_id=decision.job_id,
        job_status=decision.job_status,
        rejection=decision.rejection,
        reason=decision.reason,
    )


def dead_answer(topic: str, address: AnswerAddress, reason: str, at: datetime) -> Outgoing:
    """The answer to a record that is no usable command."""
    return _answer(topic, address, at, answer=AnswerKind.DEAD_INPUT, reason=reason[:4096])


def _answer(topic: str, address: AnswerAddress, at: datetime, **fields: Any) -> Outgoing:
    record = SubmissionAnswer(
        source_partition=address.partition,
        source_offset=address.offset,
        correlation_id=address.correlation_id,
        command_id=address.command_id,
        command_type=address.command_type,
        principal=address.principal,
        answered_at=at,
        **fields,
    )
    message = outgoing(topic, address.key or b"", record, at=at)
    if address.correlation_id is None:
        return message
    return replace(message, headers=((CORRELATION_HEADER, address.correlation_id.encode()),))
