"""A command handed to this worker's lifecycle is published only when it is left unhandled; what the
lifecycle replies to a handled one (its answer) is published instead."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from schemas.codec import decode
from schemas.commands import CancelJob
from schemas.enums import ActorRole
from streams.clock import utc_now
from streams.runtime.flusher import Flusher
from streams.runtime.handover import Handover
from streams.runtime.publisher import Outgoing


class RecordingSink:
    def __init__(self) -> None:
        self.sent: list[Outgoing] = []

    async def send_all(self, messages: Sequence[Outgoing], batch: object = None) -> list[Any]:
        self.sent += messages
        return [None] * len(messages)


@dataclass
class Handed:
    taken: asyncio.Future[bool] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    replies: list[Outgoing] = field(default_factory=list)


@dataclass
class Stages:
    """This worker's stages as a handover sees them: taking every record, or none."""

    takes_all: bool
    handed: list[Handed] = field(default_factory=list)

    def takes(self, topic: str, key: bytes) -> bool:
        return self.takes_all

    def hand_over(self, *_: Any) -> Handed | None:
        if not self.takes_all:
            return None
        self.handed.append(Handed())
        return self.handed[-1]


def handover_to(stages: Stages) -> tuple[Handover, RecordingSink]:
    sink = RecordingSink()
    handover = Handover(Flusher(sink), "commands", Counter())
    handover.local = stages
    return handover, sink


async def deliver(handover: Handover) -> CancelJob:
    command = CancelJob(
        command_id=uuid4(), job_id=uuid4(), actor_id="svc-a", actor_role=ActorRole.SERVICE, reason=""
    )
    await handover.deliver("commands", str(command.job_id).encode(), command, utc_now(), "a cancel")
    return command


async def test_a_command_no_stage_here_takes_is_published_once():
    handover, sink = handover_to(Stages(takes_all=False))
    command = await deliver(handover)
    assert [decode(message.value) for message in sink.sent] == [command]
    assert sink.sent[0].key == str(command.job_id).encode()


async def test_a_command_handled_here_is_never_published():
    stages = Stages(takes_all=True)
    handover, sink = handover_to(stages)
    await deliver(handover)
    stages.handed[0].taken.set_result(True)
    await handover.close()
    assert sink.sent == []


async def test_a_command_left_unhandled_is_published_before_close_returns():
    stages = Stages(takes_all=True)
    handover, sink = handover_to(stages)
    left = await deliver(handover)
    await deliver(handover)
    assert sink.sent == []
    stages.handed[0].taken.set_result(False)  # its partition moved before the lifecycle took it
    stages.handed[1].taken.set_result(True)
    await asyncio.sleep(0)
    await handover.close()
    assert [decode(message.value) for message in sink.sent] == [left]


async def test_what_the_stage_replies_to_a_handled_command_is_published_and_not_the_command():
    stages = Stages(takes_all=True)
    handover, sink = handover_to(stages)
    await deliver(handover)
    reply = Outgoing("answers", b"k", b"an answer")
    stages.handed[0].replies.append(reply)
    stages.handed[0].taken.set_result(True)
    await asyncio.sleep(0)
    await handover.close()
    assert sink.sent == [reply]
