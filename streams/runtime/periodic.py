"""Background rounds: run one every interval, and let a failed round wait for the next."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


async def every(interval_s: float, round_of: Callable[[], Awaitable[object]], name: str) -> None:
    while True:
        await asyncio.sleep(interval_s)
        await one_round(round_of, name)


async def one_round(round_of: Callable[[], Awaitable[object]], name: str) -> None:
    try:
        await round_of()
    except Exception as exc:  # nothing was half done: the next round starts over
        log.warning("%s failed (%s: %s); the next round retries", name, type(exc).__name__, exc)
