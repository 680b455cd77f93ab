"""What it costs to hand consumed records to a stage: scrapestream's batch consumer against a Faust agent.

    .venv/bin/pip install -e '.[bench]' && .venv/bin/python -m bench.consumers --records 100000

Fills a 4-partition topic on the embedded broker with small records, then drains it twice in this
process, each time into a stage that only counts: once through `StageConsumer` (aiokafka
`getmany`, batches of up to 500), once through a Faust agent reading `take_events(500)`. Prints
one JSON line per consumer: records/s and this process's CPU microseconds per record, from the
first record to the last (group join excluded).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from bench.processes import own_cpu_seconds
from streams.broker.access import plaintext
from streams.broker.compat import EMBEDDED_TANSU
from streams.broker.embedded import EmbeddedBroker
from streams.runtime.commit_order import OUTSIDE, Batch
from streams.runtime.consumer import QuietStage, StageConsumer
from streams.runtime.deadinput import DeadLetters
from streams.runtime.publisher import Outgoing, Publisher
from streams.runtime.topics import ensure_topics
from streams.settings import load_settings

PARTITIONS = 4
VALUE = b"x" * 200


class Clock:
    """Marks the CPU and wall time at the first record and at the last."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen = 0
        self.started: tuple[float, float] | None = None
        self.done = asyncio.Event()
        self.figures: dict[str, object] = {}

    def count(self, records: int) -> None:
        if self.started is None:
            self.started = (time.monotonic(), own_cpu_seconds())
        self.seen += records
        if self.seen >= self.expected and not self.done.is_set():
            wall, cpu = self.started
            elapsed, used = time.monotonic() - wall, own_cpu_seconds() - cpu
            self.figures = {
                "records_per_s": round(self.seen / elapsed),
                "cpu_us_per_record": round(used * 1_000_000 / self.seen, 1),
            }
            self.done.set()


class Counting(QuietStage):
    name = "counting"

    def __init__(self, topic: str, clock: Clock) -> None:
        self.topics = frozenset({topic})
        self._clock = clock

    async def handle(self, records: Sequence[Any], batch: Batch = OUTSIDE) -> None:
        self._clock.count(len(records))


async def fill(bootstrap: str, topic: str, records: int) -> None:
    publisher = Publisher(plaintext(bootstrap), EMBEDDED_TANSU)
    await publisher.start()
    try:
        for offset in range(0, records, 5_000):
            chunk = range(offset, min(offset + 5_000, records))
            await publisher.send_all([Outgoing(topic, b"k", VALUE, n % PARTITIONS) for n in chunk])
    finally:
        await publisher.stop()


async def with_stage_consumer(bootstrap: str, topic: str, records: int) -> dict[str, object]:
    settings = load_settings(kafka_bootstrap=bootstrap, broker_profile="embedded", topic_prefix="bench")
    clock = Clock(records)
    publisher = Publisher(plaintext(bootstrap), EMBEDDED_TANSU)
    await publisher.start()
    dead = DeadLetters(settings, publisher, Counter())
    consumer = StageConsumer(
        plaintext(bootstrap), "bench-stage", EMBEDDED_TANSU, [Counting(topic, clock)], dead
    )
    await consumer.start()
    try:
        await asyncio.wait_for(clock.done.wait(), 600)
    finally:
        await consumer.stop()
        await publisher.stop()
    return {"consumer": "scrapestream StageConsumer"} | clock.figures


async def with_faust_agent(bootstrap: str, topic: str, records: int) -> dict[str, object]:
    import faust

    clock = Clock(records)
    app = faust.App(
        "bench-faust",
        broker=f"kafka://{bootstrap}",
        store="memory://",
        web_enabled=False,
        datadir=tempfile.mkdtemp(prefix="bench-faust-"),
        broker_session_timeout=EMBEDDED_TANSU.session_timeout_ms / 1000,
        broker_heartbeat_interval=EMBEDDED_TANSU.heartbeat_interval_ms / 1000,
        broker_rebalance_timeout=EMBEDDED_TANSU.rebalance_timeout_ms / 1000,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
    )
    source = app.topic(topic, key_serializer="raw", value_serializer="raw", partitions=PARTITIONS)

    async def counting(stream: Any) -> None:
        async for events in stream.take_events(500, within=0.005):
            clock.count(len(events))

    app.agent(source)(counting)
    await app.start()
    try:
        await asyncio.wait_for(clock.done.wait(), 600)
    finally:
        await app.stop()
    return {"consumer": "Faust agent, take_events(500)"} | clock.figures


async def main(records: int) -> list[dict[str, object]]:
    async with EmbeddedBroker() as broker:
        settings = load_settings(
            kafka_bootstrap=broker.bootstrap,
            broker_profile="embedded",
            topic_prefix="bench",
            partitions=PARTITIONS,
            create_topics=True,
        )
        await ensure_topics(settings)
        topic = settings.topic("submit")
        await fill(broker.bootstrap, topic, records)
        return [
            await with_stage_consumer(broker.bootstrap, topic, records),
            await with_faust_agent(broker.bootstrap, topic, records),
        ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    arguments = parser.parse_args()
    for line in asyncio.run(main(arguments.records)):
        sys.stdout.write(json.dumps(line) + "\n")
