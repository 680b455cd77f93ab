"""A reservation a stopping worker wrote is released, whether or not the ledger had decided on it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from schemas.enums import PolicyClass
from schemas.work import RouteReconciled, RouteReserved
from streams.clock import utc_now
from streams.fetch.routes import Routes
from streams.runtime.publisher import Outgoing, Written
from streams.settings import load_settings
from tests.integration.test_executor import due
from tests.unit.test_timers import RecordingSink


class Ledger:
    """Folds nothing: a decision is never reached while the test waits."""

    def partition_for(self, route: str) -> int:
        return 0

    async def decision(self, reservation: RouteReserved, written: Written) -> Any:
        await asyncio.Event().wait()


class Answering(RecordingSink):
    """Keeps what would have been sent and answers where it went; with `hold_sends`, a reservation's
    send is never answered."""

    def __init__(self, hold_sends: bool) -> None:
        super().__init__()
        self.hold_sends = hold_sends
        self.reserved = asyncio.Event()

    async def send_all(self, messages: Sequence[Outgoing], batch: object = None) -> list[Any]:
        await super().send_all(messages, batch)
        if any(isinstance(message.record, RouteReserved) for message in messages):
            self.reserved.set()
            if self.hold_sends:
                await asyncio.Event().wait()  # cancelled while the broker has not answered
        return [Written(message.topic, 0, len(self.sent)) for message in messages]

    def records(self, kind: type[Any]) -> list[Any]:
        return [message.record for message in self.sent if isinstance(message.record, kind)]


@pytest.mark.parametrize("hold_sends", [False, True], ids=["awaiting the decision", "awaiting the send"])
async def test_a_reservation_cancelled_before_its_call_is_released_at_no_cost(tmp_path, hold_sends):
    settings = load_settings(
        kafka_bootstrap="127.0.0.1:9",
        data_dir=tmp_path,
        routes={"direct": {"kind": "direct", "price_per_gb": "2"}},
    )
    sink = Answering(hold_sends)
    routes = Routes(settings, sink, Ledger())  # type: ignore[arg-type]
    limits = settings.policy_classes[PolicyClass.STANDARD]
    reserving = asyncio.create_task(routes.reserve(due(), limits, utc_now()))
    await sink.reserved.wait()
    reserving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reserving
    (reserved,) = sink.records(RouteReserved)
    (released,) = sink.records(RouteReconciled)
    assert released.reservation_id == reserved.reservation_id
    assert (released.actual, released.bytes) == (0, 0)
