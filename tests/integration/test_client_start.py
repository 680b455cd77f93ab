"""Starting a Kafka client that is cancelled halfway leaves no connection open."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import warnings

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from streams.broker.compat import start_whole

pytestmark = pytest.mark.broker


class SlowClient:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.calls: list[str] = []

    async def start(self) -> None:
        self.started.set()
        await self.release.wait()
        self.calls.append("started")

    async def stop(self) -> None:
        self.calls.append("stopped")


async def test_a_cancelled_start_runs_to_its_end_then_stops_the_client():
    client = SlowClient()
    starting = asyncio.ensure_future(start_whole(client.start, client.stop))
    await client.started.wait()
    starting.cancel()
    await asyncio.sleep(0)
    assert client.calls == []  # the start is not cut short
    client.release.set()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert client.calls == ["started", "stopped"]


def test_clients_cancelled_at_any_point_of_their_start_leave_no_connection_open(broker):
    async def cancel_starts() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        with contextlib.suppress(TopicAlreadyExistsError):
            await admin.create_topics([NewTopic("starts", 1, 1)])
        await admin.close()
        pause = random.Random(7)
        for index in range(100):
            client = (
                AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
                if index % 2
                else AIOKafkaConsumer("starts", bootstrap_servers=broker.bootstrap)
            )
            starting = asyncio.ensure_future(start_whole(client.start, client.stop))
            await asyncio.sleep(pause.uniform(0, 0.02))  # before, during or after the bootstrap
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):  # a start already over is not cancelled
                await starting
            await client.stop()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(cancel_starts())  # its own loop: what was left open warns when the loop is gone
        gc.collect()
    assert [str(w.message) for w in caught if "Unclosed" in str(w.message)] == []
