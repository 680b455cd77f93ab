"""Which command partitions this worker owns, and whether their state has caught up with the log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

log = logging.getLogger(__name__)


class Ownership:
    def __init__(self, catch_up: Callable[[int], Coroutine[Any, Any, int]]) -> None:
        self._catch_up = catch_up
        self._ready: dict[int, asyncio.Task[int]] = {}

    def assigned(self, partitions: Iterable[int]) -> None:
        for partition in partitions:
            if partition not in self._ready:
                self._ready[partition] = asyncio.create_task(self._catch_up(partition))

    def revoked(self, partitions: Iterable[int]) -> None:
        for partition in partitions:
            task = self._ready.pop(partition, None)
            if task is not None and not task.done():
                task.cancel()

    async def wait_ready(self, partition: int) -> None:
        """Returns once the partition's state includes every event in the log (retrying failures)."""
        while True:
            if partition not in self._ready:
                self.assigned([partition])
            task = self._ready[partition]
            try:
                await asyncio.shield(task)
                return
            except asyncio.CancelledError:
                if task.cancelled() and partition in self._ready:
                    continue
                raise
            except Exception:
                log.exception("catching up partition %d failed; retrying", partition)
                self._ready.pop(partition, None)
                await asyncio.sleep(1)

    @property
    def owned(self) -> list[int]:
        return sorted(
            partition
            for partition, task in self._ready.items()
            if task.done() and not task.cancelled() and task.exception() is None
        )

    async def close(self) -> None:
        tasks = list(self._ready.values())
        self._ready.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
