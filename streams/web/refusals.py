"""Refused requests per principal: past `per_minute` in the last minute, its requests get 429.

A principal probing other callers' jobs, artifacts or mutations is slowed down here, and what it
can make the workers record is bounded by its audit stream's hourly limit (`MAX_AUDIT_RECORDS`).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict, deque
from collections.abc import Callable

from streams.auth.principals import Principal
from streams.web.errors import ApiError

WINDOW_S = 60.0


class RefusalLimiter:
    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._per_minute = per_minute
        self._clock = clock
        self._refused: defaultdict[str, deque[float]] = defaultdict(deque)

    def check(self, principal: Principal) -> None:
        """Raises 429 while `principal` has had `per_minute` refusals within the last minute."""
        times = self._recent(principal.name)
        if len(times) >= self._per_minute:
            wait_s = max(math.ceil(times[0] + WINDOW_S - self._clock()), 1)
            raise ApiError(
                429,
                "too_many_refusals",
                f"{len(times)} of this principal's requests were refused within a minute; retry later",
                {"Retry-After": str(wait_s)},
            )

    def refused(self, principal: Principal) -> None:
        self._recent(principal.name).append(self._clock())

    def _recent(self, name: str) -> deque[float]:
        times = self._refused[name]
        while times and times[0] <= self._clock() - WINDOW_S:
            times.popleft()
        return times
