"""Per-host politeness: how many requests to one host run at once, and how many start per second.

The due topic is keyed by host, so all of a host's work reaches one executor at a time and these
limits, kept in that executor, hold across every worker (a rebalance may overlap the previous and
the next owner for the attempts the previous one had already started). A rate of r requests per
second lets at most floor(r) (at least one) start in any window of floor(r) / r seconds.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

MAX_IDLE_HOSTS = 10_000


@dataclass(frozen=True)
class HostLimit:
    concurrency: int
    requests_per_s: float  # 0: no rate limit


def next_start_at(recent_starts: deque[float], now: float, requests_per_s: float) -> float:
    """When the next request may start, given the start times of the latest ones (oldest first)."""
    if requests_per_s <= 0:
        return now
    burst, window = _window(requests_per_s)
    if len(recent_starts) < burst:
        return now
    return max(now, recent_starts[-burst] + window)


def _window(requests_per_s: float) -> tuple[int, float]:
    """How many requests may start within how many seconds; (1, 0) without a rate limit."""
    if requests_per_s <= 0:
        return 1, 0.0
    burst = max(1, math.floor(requests_per_s))
    return burst, burst / requests_per_s


class HostGate:
    """One host's limits: a semaphore for concurrency and the start times of its latest requests."""

    def __init__(self, limit: HostLimit, clock: Callable[[], float]) -> None:
        self.limit = limit
        self._clock = clock
        self.running = asyncio.Semaphore(limit.concurrency)
        self._starts: deque[float] = deque(maxlen=_window(limit.requests_per_s)[0])
        self.holders = 0

    async def ready(self) -> None:
        """Waits until one more request may start (without starting it)."""
        await self._turn(start=False)

    async def request(self) -> None:
        """Waits until one more request may start now, and counts it as started."""
        await self._turn(start=True)

    async def _turn(self, start: bool) -> None:
        while True:
            now = self._clock()
            at = next_start_at(self._starts, now, self.limit.requests_per_s)
            if at <= now:
                if start:
                    self._starts.append(now)
                return
            await asyncio.sleep(at - now)

    @property
    def idle(self) -> bool:
        if self.holders:
            return False
        return not self._starts or self._clock() - self._starts[-1] >= _window(self.limit.requests_per_s)[1]


class Politeness:
    def __init__(
        self,
        default: HostLimit,
        overrides: Mapping[str, HostLimit],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._default = default
        self._overrides = dict(overrides)
        self._clock = clock
        self._gates: OrderedDict[str, HostGate] = OrderedDict()

    @asynccontextmanager
    async def turn(self, host: str) -> AsyncIterator[HostGate]:
        """Holds one of the host's concurrent places while the body runs; call `request()` on the
        gate before each request the body makes."""
        gate = self._gate(host)
        gate.holders += 1
        try:
            async with gate.running:
                yield gate
        finally:
            gate.holders -= 1

    def _gate(self, host: str) -> HostGate:
        gate = self._gates.get(host)
        if gate is None:
            gate = self._gates[host] = HostGate(self._overrides.get(host, self._default), self._clock)
            self._forget_idle()
        else:
            self._gates.move_to_end(host)
        return gate

    def _forget_idle(self) -> None:
        while len(self._gates) > MAX_IDLE_HOSTS:
            host, oldest = next(iter(self._gates.items()))
            if not oldest.idle:
                return
            del self._gates[host]
