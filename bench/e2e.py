"""End-to-end benchmark: N jobs through the embedded broker and one worker against a loopback origin.

    .venv/bin/python bench/e2e.py --jobs 2000

Prints one JSON line: jobs/s from first submit to last completion, and submit→completion
latency percentiles. Not a test; figures go to docs/PERFORMANCE.md with the command.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from uuid import UUID

from schemas.commands import SubmitJob
from schemas.records import Request
from streams.broker.compat import EMBEDDED_TANSU
from streams.broker.embedded import EmbeddedBroker, free_loopback_port
from streams.client import Client
from streams.clock import utc_now
from streams.settings import load_settings
from streams.worker import Worker

ORIGIN = """
import sys
from aiohttp import web
body = b"x" * 2048
async def page(request):
    return web.Response(body=body, content_type="text/html")
app = web.Application()
app.router.add_get("/{tail:.*}", page)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


SUBMIT_CHUNK = 100


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def start_origin(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", ORIGIN, str(port)])  # noqa: S603


async def wait_for_port(port: int) -> None:
    for _ in range(100):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise RuntimeError("origin did not start")


async def main(jobs: int, concurrency: int, partitions: int, sequential: bool) -> dict[str, object]:
    port = free_loopback_port()
    origin = start_origin(port)
    try:
        await wait_for_port(port)
        async with EmbeddedBroker() as broker:
            settings = load_settings(
                kafka_bootstrap=broker.bootstrap,
                broker_profile="embedded",
                data_dir=Path(tempfile.mkdtemp(prefix="scrapestream-bench-")),
                web_port=0,
                partitions=partitions,
                allow_private_networks=True,
                executor_concurrency=concurrency,
            )
            worker = Worker(settings)
            await worker.start()
            try:
                run = drive_sequential if sequential else drive
                return await run(settings.kafka_bootstrap, port, jobs) | {
                    "executor_concurrency": concurrency,
                    "partitions": partitions,
                }
            finally:
                await worker.stop()
    finally:
        origin.terminate()
        origin.wait()


async def drive(bootstrap: str, port: int, jobs: int) -> dict[str, object]:
    submitted: dict[UUID, float] = {}
    latencies_ms: list[float] = []
    async with Client(bootstrap, EMBEDDED_TANSU) as client:
        done = asyncio.Event()

        async def follow() -> None:
            async for completion in client.completions(from_beginning=True):
                sent = submitted.get(completion.job_id)
                if sent is not None and completion.status.value == "SUCCEEDED":
                    latencies_ms.append((time.monotonic() - sent) * 1000)
                    if len(latencies_ms) == jobs:
                        done.set()
                        return

        follower = asyncio.create_task(follow())
        await asyncio.sleep(1)
        deadline = utc_now() + timedelta(hours=1)
        started = time.monotonic()
        for number in range(jobs):
            command = SubmitJob(
                caller_identity="bench",
                request=Request(url=f"http://127.0.0.1:{port}/p/{number}"),
                deadline_at=deadline,
            )
            submitted[await client.submit(command)] = time.monotonic()
        submit_s = time.monotonic() - started
        await asyncio.wait_for(done.wait(), 600)
        elapsed_s = time.monotonic() - started
        follower.cancel()
    return {
        "jobs": jobs,
        "jobs_per_s": round(jobs / elapsed_s, 1),
        "submit_per_s": round(jobs / submit_s, 1),
        "latency_ms_p50": round(statistics.median(latencies_ms), 1),
        "latency_ms_p95": round(percentile(latencies_ms, 0.95), 1),
        "latency_ms_p99": round(percentile(latencies_ms, 0.99), 1),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


async def drive_sequential(bootstrap: str, port: int, jobs: int) -> dict[str, object]:
    """One job at a time on an idle system: the latency a lone job sees."""
    latencies_ms: list[float] = []
    deadline = utc_now() + timedelta(hours=1)
    async with Client(bootstrap, EMBEDDED_TANSU) as client:
        completions = client.completions(from_beginning=False)
        await asyncio.sleep(1)
        for number in range(jobs):
            url = f"http://127.0.0.1:{port}/idle/{number}"
            started = time.monotonic()
            job_id = await client.submit(
                SubmitJob(caller_identity="bench", request=Request(url=url), deadline_at=deadline)
            )
            async for completion in completions:
                if completion.job_id == job_id:
                    break
            latencies_ms.append((time.monotonic() - started) * 1000)
    return {
        "mode": "sequential",
        "jobs": jobs,
        "latency_ms_p50": round(statistics.median(latencies_ms), 1),
        "latency_ms_p95": round(percentile(latencies_ms, 0.95), 1),
        "latency_ms_p99": round(percentile(latencies_ms, 0.99), 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8, help="executor concurrency")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--sequential", action="store_true", help="one job at a time: idle latency")
    arguments = parser.parse_args()
    result = asyncio.run(
        main(arguments.jobs, arguments.concurrency, arguments.partitions, arguments.sequential)
    )
    sys.stdout.write(json.dumps(result) + "\n")
