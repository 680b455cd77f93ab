"""The worker's background tasks (timers, maintenance, snapshots, the table and ledger readers): a
task that ends while the worker runs is logged at once, with its error, and fails `/readyz`."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)


class Watchdog:
    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._stopping = False

    def watch(self, name: str, task: asyncio.Task[Any]) -> None:
        self._tasks[name] = task
        task.add_done_callback(lambda done: self._ended(name, done))

    def dead(self) -> list[str]:
        """Why each task that should be running is not."""
        if self._stopping:
            return []
        return [f"{name} stopped: {_why(task)}" for name, task in self._tasks.items() if task.done()]

    @property
    def is_stopping(self) -> bool:
        return self._stopping

    def stopping(self) -> None:
        """From here on tasks end because the worker stops."""
        self._stopping = True

    def _ended(self, name: str, task: asyncio.Task[Any]) -> None:
        if not self._stopping:
            log.error("background task %s stopped: %s", name, _why(task), exc_info=_error(task))


def _error(task: asyncio.Task[Any]) -> BaseException | None:
    return None if task.cancelled() else task.exception()


def _why(task: asyncio.Task[Any]) -> str:
    if task.cancelled():
        return "cancelled"
    error = task.exception()
    return "returned" if error is None else f"{type(error).__name__}: {error}"
