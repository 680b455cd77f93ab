"""What one job costs each topic and each stage: the measurements docs/CAPACITY.md is built on.

    .venv/bin/python -m bench.capacity --jobs 6000
    .venv/bin/python -m bench.capacity --jobs 6000 --partitions 16
    .venv/bin/python -m bench.capacity --jobs 6000 --workers 2
    .venv/bin/python -m bench.capacity --jobs 6000 --workers 2 --hosts 16

Runs `bench.e2e` and, around the client's part, samples each worker with py-spy (needs
`pip install -e '.[bench]'`), charging each sample to the stage whose code it is in; then, once two
snapshot rounds have passed, reads every worker's `/metrics` (records, record batches and bytes its
publisher wrote, per topic; transactions ended). Prints one JSON line: per job, the records, batches
and bytes of each topic (the submit topic's as the client wrote them) and of all together, the
transactions (`exactly_once`), each stage's CPU
milliseconds, and jobs per CPU-second of the whole system. Each worker runs one process unless
`--processes` says more: py-spy samples the process it is given, and a process's `/metrics` count
its own records.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from bench import e2e
from bench.processes import Child

# The first pattern found in a sample's stack, outermost frame first, names its stage.
STAGES = (
    ("intake", ("Intake.",)),
    ("lifecycle", ("Lifecycle.", "JobStore.", "TimerPass", "Timers.", "projections/")),
    (
        "executor: fetch and store",
        ("HttpExecutor.", "HttpFetcher.", "Renewals.", "aiohttp/", "streams/artifacts/"),
    ),
    ("outbox and callbacks", ("Outbox", "Callback")),
    ("global table (cache, references, controls)", ("GlobalTable.",)),
    ("snapshots and maintenance", ("Snapshots.", "Maintenance")),
    ("route ledger", ("Ledger", "RouteLedger")),
    ("HTTP API", ("uvicorn", "starlette", "fastapi", "streams/web/")),
    ("producing (aiokafka)", ("aiokafka/producer", "Publisher.", "Flusher.")),
    ("consuming (aiokafka)", ("aiokafka/consumer", "StageConsumer._fetch", "StageConsumer._mark")),
    ("Kafka connections (aiokafka)", ("aiokafka/",)),
)
SNAPSHOTS_WRITTEN_S = 11.0  # two snapshot rounds (every 5 s): each job's last change is in a snapshot
_METRIC = re.compile(r'^scrapestream_produced_(records|batches|bytes)\{topic="([^"]+)"\} ([0-9.e+]+)$')
_TRANSACTIONS = re.compile(r'^scrapestream_transactions\{result="([^"]+)"\} ([0-9.e+]+)$')


def stage_of(stack: str) -> str:
    frames = stack.split(";")
    for frame in frames:
        for stage, patterns in STAGES:
            if any(pattern in frame for pattern in patterns):
                return stage
    return "event loop and interpreter"


async def produced(worker: Child) -> Counter[str]:
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"http://{worker.address}/metrics")).text
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        matched = _METRIC.match(line)
        if matched:
            kind, topic, value = matched.groups()
            counts[f"{topic} {kind}"] += int(float(value))
        ended = _TRANSACTIONS.match(line)
        if ended:
            result, value = ended.groups()
            counts[f"transactions {result}"] += int(float(value))
    return counts


@contextlib.asynccontextmanager
async def sampled(workers: list[Child], observed: dict[str, object], directory: Path) -> AsyncIterator[None]:
    before = Counter[str]()
    for worker in workers:
        before += await produced(worker)
    spies = [
        await asyncio.create_subprocess_exec(
            str(Path(sys.executable).with_name("py-spy")),
            "record",
            "-p",
            str(worker.pid),
            "-r",
            "100",
            "-f",
            "raw",
            "-o",
            str(directory / f"{worker.pid}.txt"),
            "--nonblocking",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        for worker in workers
    ]
    try:
        yield
    finally:
        for spy in spies:
            spy.send_signal(2)  # py-spy writes its samples on SIGINT
            await spy.wait()
        await asyncio.sleep(SNAPSHOTS_WRITTEN_S)
        after = Counter[str]()
        for worker in workers:
            after += await produced(worker)
    samples: Counter[str] = Counter()
    for worker in workers:
        for line in (directory / f"{worker.pid}.txt").read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            samples[stage_of(stack)] += int(count)
    observed["produced"] = dict(sorted((after - before).items()))
    observed["samples"] = dict(samples.most_common())


def per_job(result: dict[str, object], jobs: int, client: Counter[str]) -> dict[str, object]:
    """The run's counts (the workers' and the client's submit records) divided by its jobs, and the
    worker CPU split by the stages' sample shares."""
    produced = dict(result.pop("produced"))  # type: ignore[call-overload]
    for name, count in client.items():  # `produced.<kind>.<topic>`, as the publisher counts
        _, kind, topic = name.split(".", 2)
        produced[f"{topic} {kind}"] = count
    samples = dict(result.pop("samples"))  # type: ignore[call-overload]
    transactions = {
        name.removeprefix("transactions "): round(produced.pop(name) / jobs, 3)
        for name in [name for name in produced if name.startswith("transactions ")]
    }
    topics: dict[str, dict[str, float]] = {}
    for name, count in produced.items():
        topic, kind = name.rsplit(" ", 1)
        topics.setdefault(topic, {})[kind] = round(count / jobs, 3)
    worker_ms = sum(float(str(v)) for k, v in result.items() if k.startswith("cpu_ms_per_job_worker"))
    total = sum(samples.values()) or 1
    stages = {stage: round(worker_ms * count / total, 3) for stage, count in samples.items()}
    total_ms = float(str(result["cpu_ms_per_job_total"]))
    return result | {
        "per_job_by_topic": topics,
        "per_job_all_topics": {
            kind: round(sum(counts.get(kind, 0) for counts in topics.values()), 3)
            for kind in ("records", "bytes")
        },
        "transactions_per_job": transactions,
        "worker_cpu_ms_per_job_by_stage": stages,
        "jobs_per_cpu_second": round(1000 / total_ms, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=6000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--hosts", type=int, default=1, help="origin hosts the jobs spread over")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--broker", choices=["tansu", "kafka"], default="tansu")
    parser.add_argument("--processes", type=int, default=1, help="SCRAPESTREAM_PROCESSES of each worker")
    arguments = parser.parse_args()
    client = Counter[str]()
    with tempfile.TemporaryDirectory() as scratch:

        def observe(
            workers: list[Child], observed: dict[str, object]
        ) -> contextlib.AbstractAsyncContextManager[None]:
            return sampled(workers, observed, Path(scratch))

        result = asyncio.run(
            e2e.main(
                arguments.jobs,
                64,
                arguments.partitions,
                sequential=False,
                workers=arguments.workers,
                broker_kind=arguments.broker,
                observe=observe,
                hosts=arguments.hosts,
                processes=arguments.processes,
                client_produced=client,
            )
        )
    sys.stdout.write(json.dumps(per_job(result, arguments.jobs, client)) + "\n")


if __name__ == "__main__":
    main()
