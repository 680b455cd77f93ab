"""Counts and times every HTTP request the worker answers, by method, route template and status."""

from __future__ import annotations

import time

from streams.runtime.metrics import Metrics
from streams.web.fastpath import Asgi, Message, Receive, Scope, Send

UNMATCHED = "unmatched"


class RequestMetrics:
    """The outermost ASGI layer: sees every request, the fast path's too."""

    def __init__(self, app: Asgi, metrics: Metrics) -> None:
        self._app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self._app(scope, receive, sending)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or scope.get("scrapestream.route") or UNMATCHED
            self._metrics.http_requests.labels(scope["method"], template, str(status)).observe(
                time.perf_counter() - started
            )
