"""The outbox agent: delivers each terminal callback and reports how delivery ended."""

from __future__ import annotations

from uuid import uuid5

from schemas.commands import ReportCallback
from schemas.work import CallbackDue
from streams.callbacks.sender import CallbackSender
from streams.publisher import Sink, outgoing
from streams.settings import Settings


class Outbox:
    def __init__(self, settings: Settings, sender: CallbackSender, publisher: Sink) -> None:
        self._settings = settings
        self._sender = sender
        self._publisher = publisher

    async def run(self, due: CallbackDue) -> None:
        delivery = await self._sender.deliver(due)
        report = ReportCallback(
            command_id=uuid5(due.job_id, f"callback:{due.webhook_id}"),
            job_id=due.job_id,
            delivered=delivery.delivered,
            delivery_attempts=delivery.attempts,
            http_status=delivery.http_status,
            last_error=delivery.last_error,
        )
        await self._publisher.send(outgoing(self._settings.topic("commands"), str(due.job_id), report))
