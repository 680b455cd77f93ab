"""Groups records sent one at a time by concurrent tasks into few produce requests.

Each `send` waits for its own acknowledgement; records handed in while a send is in flight go
out together in the next one, so under load the batch grows and when idle nothing waits.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from streams.runtime.failures import waiting_for
from streams.runtime.publisher import Outgoing, Sink

log = logging.getLogger(__name__)
RETRY_DELAY_S = 1.0


class Flusher:
    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._pending: list[tuple[Outgoing, asyncio.Future[Any]]] = []
        self._draining: asyncio.Task[None] | None = None

    async def send(self, message: Outgoing) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((message, future))
        if self._draining is None or self._draining.done():
            self._draining = asyncio.create_task(self._drain())
        return await future

    async def deliver(self, message: Outgoing, what: str) -> bool:
        """Send, waiting out broker failures; False (logged) only for a record Kafka will never take."""
        while True:
            try:
                await self.send(message)
                return True
            except Exception as exc:
                waits_for = waiting_for(exc)
                if waits_for is None:
                    log.error("%s cannot be published: %s", what, exc)
                    return False
                log.warning("%s waits for %s (%s)", what, waits_for, exc)
                await asyncio.sleep(RETRY_DELAY_S)

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                written = await self._sink.send_all([message for message, _ in batch])
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), meta in zip(batch, written, strict=True):
                if not future.done():
                    future.set_result(meta)
