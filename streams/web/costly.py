"""Reads that fold a log or many jobs (as-of reads, explanations, the overview, bulk replay): at most
one at a time per principal and a few across the worker, each fold run off the event loop.

So no request a principal can make holds the loop that serves every other request, and no
principal can queue more of this work than one read's worth; the rest are answered 429 at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

from streams.auth.principals import Principal
from streams.web.errors import ApiError

T = TypeVar("T")
WORKER_CONCURRENCY = 2


class CostlyReads:
    def __init__(self, concurrency: int = WORKER_CONCURRENCY) -> None:
        self._concurrency = concurrency
        self._running: dict[str, int] = {}

    @contextlib.asynccontextmanager
    async def slot(self, principal: Principal) -> AsyncIterator[None]:
        """Holds one of the worker's places for `principal`'s costly read, or refuses it (429)."""
        if principal.name in self._running:
            raise _busy(f"principal {principal.name} already has a read of this kind running; one at a time")
        if len(self._running) >= self._concurrency:
            raise _busy(f"{len(self._running)} reads of this kind are running on this worker; retry shortly")
        self._running[principal.name] = 1
        try:
            yield
        finally:
            del self._running[principal.name]

    async def run(self, principal: Principal, fold: Callable[[], T]) -> T:
        """`fold` in a thread, within `principal`'s place."""
        async with self.slot(principal):
            return await asyncio.to_thread(fold)


def _busy(message: str) -> ApiError:
    return ApiError(429, "too_many_reads", message, {"Retry-After": "1"})
