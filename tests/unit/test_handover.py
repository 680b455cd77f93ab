"""A command handed to this worker's lifecycle is published only when it is left unhandled."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
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

    async def send_all(self, messages: Sequence[Outgoing]) -> list[Any]:
        self.sent += messages
        return [None] * len(messages)


def handover_to(outcome: bool | None) -> tuple[Handover, RecordingSink, list[asyncio.Future[bool]]]:
    """A handover whose lifecycle takes nothing (None), or answers each command with `outcome`."""
    sink = RecordingSink()
    handover = Handover(Flusher(sink), "commands", Counter())
    futures: list[asyncio.Future[bool]] = []

    class Stages:
        def takes(self, topic: str, key: bytes) -> bool:
            return outcome is not None

        def hand_over(self, *_: Any) -> asyncio.Future[bool] | None:
            if outcome is None:
                return None
            future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            futures.append(future)
            return future

    handover.local = Stages()
    return handover, sink, futures


def cancel() -> CancelJob:
    return CancelJob(
        command_id=uuid4(), job_id=uuid4(), actor_id="svc-a", actor_role=ActorRole.SERVICE, reason=""
    )


async def test_a_command_no_lifecycle_here_takes_is_published_once():
    handover, sink, _ = handover_to(None)
    command = cancel()
    await handover.deliver("commands", str(command.job_id).encode(), command, utc_now(), "a cancel")
    assert [decode(message.value) for message in sink.sent] == [command]
    assert sink.sent[0].key == str(command.job_id).encode()


async def test_a_command_handled_here_is_never_published():
    handover, sink, futures = handover_to(True)
    command = cancel()
    await handover.deliver("commands", str(command.job_id).encode(), command, utc_now(), "a cancel")
    futures[0].set_result(True)
    await handover.close()
    assert sink.sent == []


async def test_a_command_left_unhandled_is_published_before_close_returns():
    handover, sink, futures = handover_to(False)
    commands = [cancel(), cancel()]
    for command in commands:
        await handover.deliver("commands", str(command.job_id).encode(), command, utc_now(), "a cancel")
    assert sink.sent == []
    futures[0].set_result(False)  # its partition moved before the lifecycle took it
    futures[1].set_result(True)
    await asyncio.sleep(0)
    await handover.close()
    assert [decode(message.value) for message in sink.sent] == [commands[0]]
