"""One commit round of `exactly_once`: a transaction of one record and its input offset, one after
another on one producer, on an Apache Kafka node started for the run.

    .venv/bin/python -m bench.transactions                      # with scrapestream's retry wait
    .venv/bin/python -m bench.transactions --retry-wait-ms 20   # with aiokafka's own

A transaction begun right after a commit is refused until the broker has written the last one's
markers; `--retry-wait-ms` is how long the producer waits before it asks again. Each round is read
back by a `read_committed` consumer, as a stage reads; the same rounds without a transaction (an
idempotent produce) follow, for the cost a transaction adds to a hop: its time and the broker's CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

import aiokafka.producer.sender
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import NewTopic

from bench.e2e import percentile, running_broker
from bench.processes import tree_cpu_seconds
from streams.broker.clients import kafka_admin, kafka_consumer, kafka_producer

WARM_UP = 10
IDLE_S = 5.0


async def main(transactions: int, retry_wait_ms: float | None) -> dict[str, object]:
    if retry_wait_ms is not None:
        aiokafka.producer.sender.BACKOFF_OVERRIDE = retry_wait_ms / 1000
    with tempfile.TemporaryDirectory(prefix="scrapestream-bench-") as directory:
        async with running_broker("kafka", Path(directory)) as broker:
            topic = f"bench-{uuid4().hex[:8]}"
            admin = kafka_admin(broker.access)
            await admin.start()
            try:
                await admin.create_topics([NewTopic(topic, 1, 1)])
            finally:
                await admin.close()
            options = broker.profile.producer_options()
            producer = kafka_producer(broker.access, transactional_id=topic, **options)
            plain = kafka_producer(broker.access, **options)
            reader = kafka_consumer(broker.access, **broker.profile.consumer_options())
            await asyncio.gather(producer.start(), plain.start(), reader.start())
            reader.assign([TopicPartition(topic, 0)])
            try:
                transactional = await rounds(
                    transactions, reader, transaction_of(producer, topic), broker.pid
                )
                idle_cpu_s = tree_cpu_seconds(broker.pid)
                await asyncio.sleep(IDLE_S)
                idle_cpu_s = tree_cpu_seconds(broker.pid) - idle_cpu_s
                produced = await rounds(transactions, reader, produce_of(plain, topic), broker.pid)
            finally:
                await asyncio.gather(producer.stop(), plain.stop(), reader.stop())
    return {
        "transactions": transactions,
        "retry_wait_ms": aiokafka.producer.sender.BACKOFF_OVERRIDE * 1000,
        "commit_round_ms_p50": round(statistics.median(transactional.done_ms), 1),
        "commit_round_ms_p90": round(percentile(transactional.done_ms, 0.9), 1),
        "read_committed_sees_it_ms_p50": round(statistics.median(transactional.seen_ms), 1),
        "broker_cpu_ms_a_transaction": transactional.broker_cpu_ms,
        "produce_ms_p50": round(statistics.median(produced.done_ms), 1),
        "reader_sees_it_ms_p50": round(statistics.median(produced.seen_ms), 1),
        "broker_cpu_ms_a_produce": produced.broker_cpu_ms,
        "broker_idle_core_percent": round(idle_cpu_s * 100 / IDLE_S, 1),
    }


@dataclass
class Rounds:
    done_ms: list[float]  # until the write was acknowledged (committed)
    seen_ms: list[float]  # until the reader had it
    broker_cpu_ms: float  # a round


def transaction_of(producer: AIOKafkaProducer, topic: str) -> Callable[[int], Awaitable[None]]:
    async def one(offset: int) -> None:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"record", partition=0)
            await producer.send_offsets_to_transaction({TopicPartition(topic, 0): offset}, topic)

    return one


def produce_of(producer: AIOKafkaProducer, topic: str) -> Callable[[int], Awaitable[None]]:
    async def one(offset: int) -> None:
        await producer.send_and_wait(topic, b"record", partition=0)

    return one


async def rounds(
    count: int, reader: AIOKafkaConsumer, one: Callable[[int], Awaitable[None]], broker_pid: int
) -> Rounds:
    """Each round written, then read by a consumer that waits at the broker (how a stage reads)."""
    for offset in range(WARM_UP):
        await round_trip(reader, one, offset)
    cpu_s = tree_cpu_seconds(broker_pid)
    timings = [await round_trip(reader, one, WARM_UP + n) for n in range(count)]
    cpu_ms = (tree_cpu_seconds(broker_pid) - cpu_s) * 1000 / count
    return Rounds([done for done, _ in timings], [seen for _, seen in timings], round(cpu_ms, 2))


async def round_trip(
    reader: AIOKafkaConsumer, one: Callable[[int], Awaitable[None]], offset: int
) -> tuple[float, float]:
    """Milliseconds until round `offset` was written, and until the reader had it."""
    started = time.perf_counter()
    await one(offset)
    done = time.perf_counter()
    while not await reader.getmany(timeout_ms=1_000):
        pass
    return (done - started) * 1000, (time.perf_counter() - started) * 1000


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=100)
    parser.add_argument("--retry-wait-ms", type=float, help="unset: scrapestream's (2 ms)")
    arguments = parser.parse_args()
    result = asyncio.run(main(arguments.transactions, arguments.retry_wait_ms))
    sys.stdout.write(json.dumps(result) + "\n")
