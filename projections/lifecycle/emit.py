"""Stamps the envelope on the events one command causes: ids, sequence and time."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID, uuid5

import msgspec

from projections.lifecycle.identity import JOB_NAMESPACE, event_ids
from schemas.commands import Command
from schemas.events import Event

E = TypeVar("E", bound=Event)


def held_event(holder: Event, event_type: type[E], label: str, **fields: Any) -> E:
    """An event another one holds (a creation's audit record, a first dispatch in its acceptance): the
    holder's envelope, with an id of its own derived from the holder's."""
    return event_type(
        event_id=uuid5(holder.event_id, label),
        job_id=holder.job_id,
        sequence=holder.sequence,
        occurred_at=holder.occurred_at,
        command_id=holder.command_id,
        **fields,
    )


def command_id_of(command: Command) -> UUID:
    """The command's own id, or one derived from its content when a producer sent none."""
    if command.command_id is not None:
        return command.command_id
    digest = hashlib.sha256(msgspec.json.encode(command)).hexdigest()
    return uuid5(JOB_NAMESPACE, f"{type(command).__name__}:{digest}")


@dataclass
class Emitter:
    """Collects one command's events; each gets a deterministic id and the next sequence."""

    command_id: UUID
    job_id: UUID
    sequence: int
    now: datetime
    events: list[Event] = field(default_factory=list)
    _event_id: Callable[[int], UUID] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._event_id = event_ids(self.command_id, self.job_id)

    def __call__(self, event_type: type[E], **fields: Any) -> E:
        index = len(self.events)
        event = event_type(
            event_id=self._event_id(index),
            job_id=self.job_id,
            sequence=self.sequence + index + 1,
            occurred_at=self.now,
            command_id=self.command_id,
            **fields,
        )
        self.events.append(event)
        return event

    def derived_id(self, label: str) -> UUID:
        """A further deterministic id owned by this command (e.g. an audit record's)."""
        return uuid5(self.command_id, label)
