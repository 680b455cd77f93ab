"""One loop tells the lifecycle about running attempts: each one's start, then its renewals.

An attempt still running `START_AFTER_S` after it began is reported started (`StartAttempt`),
then renewed on its derived interval. Quick attempts end before either and report only once.
A message that cannot be published is logged and retried at the next interval: it never stops
the fetch it is for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import datetime
from uuid import UUID, uuid5

from schemas.commands import RenewLease, StartAttempt
from schemas.work import DueWork
from streams.runtime.flusher import Flusher
from streams.runtime.publisher import outgoing

log = logging.getLogger(__name__)
TICK_S = 1.0  # the longest sleep, so attempts added meanwhile are looked at soon enough
START_AFTER_S = 1.0


class Renewals:
    def __init__(self, sink: Flusher, topic: str, clock: Callable[[], datetime]) -> None:
        self._sink = sink
        self._topic = topic
        self._clock = clock
        self._running: dict[UUID, tuple[DueWork, float, int]] = {}  # work, next message at, messages sent
        self._loop: asyncio.Task[None] | None = None

    def add(self, work: DueWork) -> None:
        self._running[work.lease_id] = (work, time.monotonic() + START_AFTER_S, 0)
        if self._loop is None or self._loop.done():
            self._loop = asyncio.create_task(self._renew_due())

    def discard(self, work: DueWork) -> None:
        self._running.pop(work.lease_id, None)

    async def _renew_due(self) -> None:
        while self._running:
            earliest = min(at for _, at, _ in self._running.values())
            await asyncio.sleep(max(0.0, min(earliest - time.monotonic(), TICK_S)))
            now = time.monotonic()
            due = [(work, at, count) for work, at, count in self._running.values() if at <= now]
            for work, at, count in due:
                interval = work.renew_interval_ms / 1000
                # Renewals keep the rhythm of the attempt's start: interval, 2 intervals, ...
                following = at - START_AFTER_S + interval if count == 0 else at + interval
                self._running[work.lease_id] = (work, following, count + 1)
            due_work = [(work, count) for work, _, count in due]
            await asyncio.gather(*(self._renew(work, count) for work, count in due_work))

    async def _renew(self, work: DueWork, count: int) -> None:
        """The first message is the start, the others renewals."""
        kind = RenewLease if count else StartAttempt
        label = f"renew:{count}" if count else "start"
        command = kind(
            command_id=uuid5(work.lease_id, label),
            job_id=work.job_id,
            attempt_number=work.attempt_number,
            lease_id=work.lease_id,
        )
        try:
            await self._sink.send(outgoing(self._topic, work.job_id, command, at=self._clock()))
        except Exception as exc:
            log.warning("job %s: lease renewal not published (%s); the fetch goes on", work.job_id, exc)

    async def close(self) -> None:
        self._running.clear()
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
