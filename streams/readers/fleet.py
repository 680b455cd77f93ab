"""Which job types the running workers' executors run, so a submission none of them can run is
rejected at once (`UNSUPPORTED_JOB_TYPE`, saying what to install) rather than left to lapse.

Each worker announces what its executor reads, and why it runs none of the other types it knows,
on the compacted controls topic (`executor/<worker>`) every `ANNOUNCE_S`, and removes it when it
stops; every worker reads them all through its global table. An announcement not renewed within
`LIVES_S` is of a worker that is gone. A worker that has not yet read the others' announcements
(its first `SETTLE_S`) refuses nothing it cannot run itself; `dev`, alone on its broker, knows at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from schemas.work import ExecutorAnnouncement
from streams.readers.global_table import EXECUTOR_KEY, GlobalTable
from streams.runtime.publisher import Publisher, outgoing, tombstone

log = logging.getLogger(__name__)
ANNOUNCE_S = 10.0
LIVES_S = 45.0
SETTLE_S = 15.0
STOP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Capabilities:
    """The job types some executor runs, and why each known type none runs cannot run."""

    runs: frozenset[str]
    cannot_run: Mapping[str, str]


def merged(own: Capabilities, others: Iterable[ExecutorAnnouncement], now: datetime) -> Capabilities:
    """What this worker and every other live one run; for each type none runs, the first reason given."""
    live = [said for said in others if said.expires_at > now]
    runs = own.runs.union(*(said.runs for said in live))
    cannot_run: dict[str, str] = {}
    for said in (own.cannot_run, *(announced.cannot_run for announced in live)):
        cannot_run |= {name: why for name, why in said.items() if name not in runs and name not in cannot_run}
    return Capabilities(runs, cannot_run)


def startup_lines(own: Capabilities) -> list[str]:
    """What a worker says at start about the job types it runs, and why not the others."""
    lines = [f"this worker runs job types: {', '.join(sorted(own.runs)) or 'none'}"]
    lines += [f"it does not run {name}: {why}" for name, why in sorted(own.cannot_run.items())]
    return lines


class Fleet:
    def __init__(
        self,
        worker: str,
        own: Capabilities,
        publisher: Publisher,
        topic: str,
        table: GlobalTable,
        clock: Callable[[], datetime],
        alone: bool = False,
    ) -> None:
        self.worker = worker
        self.own = own
        self._publisher = publisher
        self._topic = topic
        self._table = table
        self._clock = clock
        self._settled_at = clock() + timedelta(seconds=0 if alone else SETTLE_S)
        self._task: asyncio.Task[None] | None = None
        self._caught_up = False  # once it has read the announcements there were at its start

    async def start(self) -> None:
        await self._announce()
        self._task = asyncio.create_task(self._keep_announcing(), name="executor-announcements")

    def view(self) -> Capabilities | None:
        """What every live worker runs, this one included; None until the others can be known."""
        now = self._clock()
        if not self._caught_up:
            self._caught_up = now >= self._settled_at and self._table.caught_up()
            if not self._caught_up:
                return None
        others = [said for said in self._table.executors.values() if said.worker != self.worker]
        return merged(self.own, others, now)

    async def _keep_announcing(self) -> None:
        while True:
            await asyncio.sleep(ANNOUNCE_S)
            try:
                await self._announce()
            except Exception as exc:  # the next round announces again; others see it lapse meanwhile
                log.warning("could not announce this worker's job types (%s); trying again", exc)

    async def _announce(self) -> None:
        now = self._clock()
        said = ExecutorAnnouncement(
            worker=self.worker,
            runs=tuple(sorted(self.own.runs)),
            cannot_run=dict(self.own.cannot_run),
            announced_at=now,
            expires_at=now + timedelta(seconds=LIVES_S),
        )
        await self._publisher.send_all([outgoing(self._topic, self._key, said)])

    @property
    def _key(self) -> bytes:
        return EXECUTOR_KEY + self.worker.encode()

    @property
    def task(self) -> asyncio.Task[None] | None:
        return self._task

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):  # a worker that cannot say so lapses after LIVES_S
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await self._publisher.send_all([tombstone(self._topic, self._key)])
