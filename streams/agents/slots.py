"""A bounded set of running tasks: how many more may start, and a graceful end for the rest."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class Slots:
    def __init__(self, size: int) -> None:
        self.size = size
        self._running: set[asyncio.Task[None]] = set()
        self._freed = asyncio.Event()

    def free(self) -> int:
        return self.size - len(self._running)

    async def wait_free(self) -> None:
        while self.free() <= 0:
            self._freed.clear()
            await self._freed.wait()

    def start(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._running.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._freed.set()

    async def idle(self) -> None:
        """Returns once no task runs."""
        while self._running:
            await asyncio.wait(set(self._running))

    async def close(self, grace_s: float) -> None:
        """Let running tasks finish within `grace_s`, then cancel the rest."""
        running = set(self._running)
        if not running:
            return
        _, pending = await asyncio.wait(running, timeout=grace_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
