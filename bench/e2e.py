"""End-to-end benchmark: N jobs through a broker and a `scrapestream worker` process.

    .venv/bin/python -m bench.e2e --jobs 3000
    .venv/bin/python -m bench.e2e --jobs 200 --sequential
    .venv/bin/python -m bench.e2e --jobs 200 --sequential --processes 1   # one process a worker
    .venv/bin/python -m bench.e2e --jobs 200 --sequential --timeline      # when each record was decided
    .venv/bin/python -m bench.e2e --jobs 6000 --runs 5     # each run, then the medians
    .venv/bin/python -m bench.e2e --jobs 3000 --broker kafka   # Apache Kafka, one node
    .venv/bin/python -m bench.e2e --jobs 3000 --broker kafka --guarantee at_least_once
    .venv/bin/python -m bench.e2e --jobs 6000 --trace 1      # every job traced, into a Zipkin server
    .venv/bin/python -m bench.e2e --jobs 6000 --trace 0.01   # 1% of jobs sampled

The broker is the embedded tansu, or one Apache Kafka node started for the run (its jars fetched
once through `tests/kafka/pom.xml`).

The broker, the worker and a loopback origin (2 KiB page) each run in their own process; this
process is the client: it publishes the submissions in batches and follows the completions.
Prints one JSON line: jobs/s from first submit to last completion, submit→completion latency
percentiles, and CPU milliseconds per job of each process. Not a test; figures go to
docs/PERFORMANCE.md with the command.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import cast
from uuid import UUID, uuid4

from bench.kafka import KafkaCluster, fetch_kafka
from bench.processes import (
    Child,
    origin_url,
    own_cpu_seconds,
    start_origin,
    start_worker,
    tree_cpu_seconds,
    worker_environment,
)
from bench.timeline import record_timeline
from bench.zipkin import running_zipkin
from projections.lifecycle.submission import submission_identity
from schemas.commands import SubmitJob
from schemas.records import Request
from streams.broker.access import KafkaAccess, plaintext
from streams.broker.compat import EMBEDDED_TANSU, KAFKA, BrokerProfile
from streams.broker.embedded import EmbeddedBroker, free_loopback_port
from streams.client import Client
from streams.clock import utc_now
from streams.runtime.publisher import Publisher, outgoing

SUBMIT_BATCH = 500
Observer = Callable[[list[Child], dict[str, object]], contextlib.AbstractAsyncContextManager[None]]
POM = Path(__file__).parent.parent / "tests" / "kafka" / "pom.xml"


@dataclass(frozen=True)
class Broker:
    bootstrap: str
    pid: int
    profile: BrokerProfile
    profile_name: str

    @property
    def access(self) -> KafkaAccess:
        return plaintext(self.bootstrap)


@contextlib.asynccontextmanager
async def running_broker(kind: str, directory: Path) -> AsyncIterator[Broker]:
    if kind == "kafka":
        async with KafkaCluster(fetch_kafka(POM), directory / "kafka", nodes=1) as cluster:
            process = cluster.members[0].process
            yield Broker(cluster.bootstrap, process.pid if process else 0, KAFKA, "kafka")
        return
    async with EmbeddedBroker() as embedded:
        yield Broker(embedded.bootstrap, embedded.pid or 0, EMBEDDED_TANSU, "embedded")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def latency(values: list[float]) -> dict[str, float]:
    return {
        "latency_ms_p50": round(statistics.median(values), 1),
        "latency_ms_p95": round(percentile(values, 0.95), 1),
        "latency_ms_p99": round(percentile(values, 0.99), 1),
    }


async def main(
    jobs: int,
    concurrency: int,
    partitions: int,
    sequential: bool,
    workers: int = 1,
    broker_kind: str = "tansu",
    guarantee: str | None = None,
    observe: Observer | None = None,
    hosts: int = 1,
    client_produced: Counter[str] | None = None,
    processes: int | None = None,
    timeline: bool = False,
) -> dict[str, object]:
    """One run; `observe` wraps the client's part, given the workers, and adds to the result;
    `client_produced` counts what the client writes (the submit topic's records, batches, bytes)."""
    port = free_loopback_port()
    origin = await start_origin(port, hosts)
    data_dir = Path(tempfile.mkdtemp(prefix="scrapestream-bench-"))
    try:
        async with running_broker(broker_kind, data_dir) as broker:
            running = []
            for number in range(workers):
                environment = worker_environment(
                    broker.bootstrap,
                    data_dir / str(number),
                    broker_profile=broker.profile_name,
                    partitions=partitions,
                    executor_concurrency=concurrency,
                    host_concurrency=concurrency,  # each origin host stands for many sites
                    **({} if guarantee is None else {"processing_guarantee": guarantee}),
                    **({} if processes is None else {"processes": processes}),
                )
                (data_dir / str(number)).mkdir()
                running.append(await start_worker(environment, data_dir / f"worker-{number}.log"))
            try:
                pids = {"broker": broker.pid, "origin": origin.pid}
                pids |= {"worker" if n == 0 else f"worker{n}": w.pid for n, w in enumerate(running)}
                await asyncio.sleep(8 if workers > 1 else 0)  # the group settles before the clock starts
                observed: dict[str, object] = {}
                async with observe(running, observed) if observe else contextlib.nullcontext():
                    if sequential:
                        result = await drive_sequential(broker, port, jobs, pids, hosts, timeline)
                    else:
                        result = await drive(broker, port, jobs, pids, hosts, client_produced)
                result |= observed
            finally:
                for worker in running:
                    await worker.stop()
    finally:
        await origin.stop()
    shutil.rmtree(data_dir, ignore_errors=True)  # kept when the run failed: its workers' logs are there
    return result | {
        "executor_concurrency": concurrency,
        "partitions": partitions,
        "workers": workers,
        "broker": broker_kind,
        "hosts": hosts,
        "processes": "auto" if processes is None else processes,
    }


def cpu_snapshot(pids: dict[str, int]) -> dict[str, float]:
    return {name: tree_cpu_seconds(pid) for name, pid in pids.items()} | {"client": own_cpu_seconds()}


def cpu_per_job(before: dict[str, float], after: dict[str, float], jobs: int) -> dict[str, float]:
    per_process = {
        f"cpu_ms_per_job_{name}": round((after[name] - before[name]) * 1000 / jobs, 3) for name in before
    }
    return per_process | {"cpu_ms_per_job_total": round(sum(per_process.values()), 3)}


def commands(port: int, jobs: int, tag: str, hosts: int = 1) -> list[SubmitJob]:
    deadline = utc_now() + timedelta(hours=1)
    return [
        SubmitJob(
            command_id=uuid4(),  # as the Python client sends them
            caller_identity="bench",
            request=Request(url=origin_url(port, hosts, n, f"{tag}/{n}")),
            deadline_at=deadline,
        )
        for n in range(jobs)
    ]


async def drive(
    broker: Broker,
    port: int,
    jobs: int,
    pids: dict[str, int],
    hosts: int,
    produced: Counter[str] | None = None,
) -> dict[str, object]:
    submitted: dict[UUID, float] = {}
    latencies_ms: list[float] = []
    done = asyncio.Event()
    async with Client(broker.access, broker.profile) as client:

        async def follow() -> None:
            async with contextlib.aclosing(client.completions(from_beginning=True)) as completions:
                async for completion in completions:
                    sent = submitted.get(completion.job_id)
                    if sent is not None and completion.status.value == "SUCCEEDED":
                        latencies_ms.append((time.monotonic() - sent) * 1000)
                        if len(latencies_ms) == jobs:
                            done.set()
                            return

        follower = asyncio.create_task(follow())
        await asyncio.sleep(1)
        publisher = Publisher(broker.access, broker.profile, produced)
        await publisher.start()
        pending = commands(port, jobs, "p", hosts)
        before = cpu_snapshot(pids)
        started = time.monotonic()
        for offset in range(0, jobs, SUBMIT_BATCH):
            batch = pending[offset : offset + SUBMIT_BATCH]
            messages = []
            for command in batch:
                job_id = submission_identity(command)[0]
                messages.append(outgoing("scrapestream.submit", str(job_id), command))
                submitted[job_id] = time.monotonic()
            await publisher.send_all(messages)
        submit_s = time.monotonic() - started
        await asyncio.wait_for(done.wait(), 600)
        elapsed_s = time.monotonic() - started
        after = cpu_snapshot(pids)
        follower.cancel()
        await publisher.stop()
    return (
        {
            "jobs": jobs,
            "jobs_per_s": round(jobs / elapsed_s, 1),
            "submit_per_s": round(jobs / submit_s, 1),
        }
        | latency(latencies_ms)
        | cpu_per_job(before, after, jobs)
        | {"cpus": os.cpu_count(), "python": platform.python_version()}
    )


async def drive_sequential(
    broker: Broker, port: int, jobs: int, pids: dict[str, int], hosts: int, timeline: bool = False
) -> dict[str, object]:
    """One job at a time on an otherwise idle system: the latency a lone job sees (and with `timeline`,
    when each of its records was decided)."""
    latencies_ms: list[float] = []
    job_ids: set[UUID] = set()
    async with (
        Client(broker.access, broker.profile) as client,
        contextlib.aclosing(client.completions(from_beginning=False)) as completions,
    ):
        await asyncio.sleep(1)
        before = cpu_snapshot(pids)
        for command in commands(port, jobs, "idle", hosts):
            started = time.monotonic()
            job_id = await client.submit(command)
            job_ids.add(job_id)
            async for completion in completions:
                if completion.job_id == job_id:
                    break
            latencies_ms.append((time.monotonic() - started) * 1000)
        after = cpu_snapshot(pids)
    result = {"mode": "sequential", "jobs": jobs} | latency(latencies_ms) | cpu_per_job(before, after, jobs)
    return result | (await record_timeline(broker.access, job_ids) if timeline else {})


@contextlib.contextmanager
def traced(ratio: float | None) -> Iterator[dict[str, object]]:
    """With a ratio, the workers export spans (OTEL_* in their environment) to a Zipkin server."""
    if ratio is None:
        yield {"tracing": "off"}
        return
    with tempfile.TemporaryDirectory() as directory, running_zipkin(Path(directory) / "zipkin.log") as url:
        os.environ |= {
            "OTEL_TRACES_EXPORTER": "zipkin",
            "OTEL_EXPORTER_ZIPKIN_ENDPOINT": f"{url}/api/v2/spans",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": str(ratio),
        }
        yield {"tracing": f"zipkin, sampled {ratio:g}"}


def median_of(results: list[dict[str, object]]) -> dict[str, object]:
    """Each numeric figure's median over the runs (other values from the first run)."""
    summary = dict(results[0])
    for key, value in results[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            summary[key] = statistics.median(cast(float, result[key]) for result in results)
    return summary | {"median_of_runs": len(results)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64, help="executor concurrency of the worker")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--sequential", action="store_true", help="one job at a time: lone-job latency")
    parser.add_argument("--workers", type=int, default=1, help="worker processes sharing the partitions")
    parser.add_argument(
        "--processes", type=int, help="SCRAPESTREAM_PROCESSES of each worker (unset: the product's auto)"
    )
    parser.add_argument(
        "--timeline", action="store_true", help="with --sequential: when each of a job's records was decided"
    )
    parser.add_argument("--runs", type=int, default=1, help="repeat; a last line gives the medians")
    parser.add_argument("--broker", choices=["tansu", "kafka"], default="tansu")
    parser.add_argument(
        "--hosts", type=int, default=1, help="origin hosts (127.0.0.1 and on) the jobs spread over"
    )
    parser.add_argument(
        "--trace",
        type=float,
        help="export spans to a Zipkin server started for the run, sampling this share of jobs (unset: off)",
    )
    parser.add_argument(
        "--guarantee",
        choices=["exactly_once", "at_least_once"],
        help="SCRAPESTREAM_PROCESSING_GUARANTEE (unset: the broker profile's default)",
    )
    arguments = parser.parse_args()
    options = (
        arguments.jobs,
        arguments.concurrency,
        arguments.partitions,
        arguments.sequential,
        arguments.workers,
        arguments.broker,
        arguments.guarantee,
    )
    more = {"hosts": arguments.hosts, "processes": arguments.processes, "timeline": arguments.timeline}
    results = []
    with traced(arguments.trace) as tracing:
        for _ in range(arguments.runs):
            results.append(asyncio.run(main(*options, **more)) | tracing)
            sys.stdout.write(json.dumps(results[-1]) + "\n")
            sys.stdout.flush()
    if arguments.runs > 1:
        sys.stdout.write(json.dumps(median_of(results)) + "\n")
