"""Groups records sent one at a time by concurrent tasks into few produce requests.

Each `send` waits for its own acknowledgement; records handed in while a send is in flight go
out together in the next one, so under load the batch grows and when idle nothing waits.
"""

from __future__ import annotations

import asyncio
from typing import Any

from streams.publisher import Outgoing, Sink


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
