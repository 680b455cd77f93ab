"""The worker's fetch places, shared between callers: one caller holds at most its share of them,
and a freed place goes to the waiting caller that holds fewest (the longest waiting among equals)."""

from __future__ import annotations

import asyncio
import itertools
import math
from collections import Counter, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class FairPlaces:
    def __init__(self, size: int, share: float) -> None:
        self.size = max(size, 1)
        self.per_caller = max(1, math.floor(self.size * share))
        self._free = self.size
        self._held: Counter[str] = Counter()
        self._waiting: dict[str, deque[tuple[int, asyncio.Future[None]]]] = {}
        self._arrivals = itertools.count()

    @asynccontextmanager
    async def held(self, caller: str) -> AsyncIterator[None]:
        await self._take(caller)
        try:
            yield
        finally:
            self._give(caller)

    async def _take(self, caller: str) -> None:
        if self._free > 0 and self._held[caller] < self.per_caller:
            self._grant(caller)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (next(self._arrivals), granted)
        self._waiting.setdefault(caller, deque()).append(entry)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():  # granted as it was cancelled: not used
                self._give(caller)
            else:
                self._forget(caller, entry)
            raise

    def _grant(self, caller: str) -> None:
        self._free -= 1
        self._held[caller] += 1

    def _give(self, caller: str) -> None:
        self._free += 1
        self._held[caller] -= 1
        if self._held[caller] == 0:
            del self._held[caller]
        self._hand_on()

    def _hand_on(self) -> None:
        while self._free > 0:
            eligible = [
                (self._held[caller], queue[0][0], caller)
                for caller, queue in self._waiting.items()
                if self._held[caller] < self.per_caller
            ]
            if not eligible:
                return
            _, _, caller = min(eligible)
            queue = self._waiting[caller]
            _, granted = queue.popleft()
            if not queue:
                del self._waiting[caller]
            self._grant(caller)
            granted.set_result(None)

    def _forget(self, caller: str, entry: tuple[int, asyncio.Future[None]]) -> None:
        queue = self._waiting.get(caller)
        if queue is None:
            return
        queue.remove(entry)
        if not queue:
            del self._waiting[caller]
