"""One commit round of `exactly_once`: a transaction of one record and its input offset, one after
another on one producer, on an Apache Kafka node started for the run.

    .venv/bin/python -m bench.transactions                      # with scrapestream's retry wait
    .venv/bin/python -m bench.transactions --retry-wait-ms 20   # with aiokafka's own

A transaction begun right after a commit is refused until the broker has written the last one's
markers; `--retry-wait-ms` is how long the producer waits before it asks again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from uuid import uuid4

import aiokafka.producer.sender
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench.e2e import percentile, running_broker

WARM_UP = 10


async def main(transactions: int, retry_wait_ms: float | None) -> dict[str, object]:
    if retry_wait_ms is not None:
        aiokafka.producer.sender.BACKOFF_OVERRIDE = retry_wait_ms / 1000
    with tempfile.TemporaryDirectory(prefix="scrapestream-bench-") as directory:
        async with running_broker("kafka", Path(directory)) as broker:
            topic = f"bench-{uuid4().hex[:8]}"
            admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
            await admin.start()
            try:
                await admin.create_topics([NewTopic(topic, 1, 1)])
            finally:
                await admin.close()
            producer = AIOKafkaProducer(
                bootstrap_servers=broker.bootstrap,
                transactional_id=topic,
                **broker.profile.producer_options(),
            )
            await producer.start()
            rounds: list[float] = []
            try:
                for offset in range(transactions + WARM_UP):
                    started = time.perf_counter()
                    async with producer.transaction():
                        await producer.send_and_wait(topic, b"record", partition=0)
                        await producer.send_offsets_to_transaction({TopicPartition(topic, 0): offset}, topic)
                    rounds.append((time.perf_counter() - started) * 1000)
            finally:
                await producer.stop()
    measured = rounds[WARM_UP:]
    return {
        "transactions": transactions,
        "retry_wait_ms": aiokafka.producer.sender.BACKOFF_OVERRIDE * 1000,
        "commit_round_ms_p50": round(statistics.median(measured), 1),
        "commit_round_ms_p90": round(percentile(measured, 0.9), 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=100)
    parser.add_argument("--retry-wait-ms", type=float, help="unset: scrapestream's (2 ms)")
    arguments = parser.parse_args()
    result = asyncio.run(main(arguments.transactions, arguments.retry_wait_ms))
    sys.stdout.write(json.dumps(result) + "\n")
