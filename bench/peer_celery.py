"""scrapestream beside a Celery + Redis worker doing the same job, alternated: the ratio in one command.

    .venv/bin/python -m bench.peer_celery --jobs 4000 --pairs 2

Needs `pip install -e '.[bench]'` (Celery 5 with Redis) and Debian's `redis-server`.

The Celery side: one `redis-server` (broker and result backend), a Celery worker with
`-P prefork -c 2`, a task that fetches a 2 KiB loopback page with a pooled HTTP client
(urllib3, one pool per worker process) and writes the body to a content-addressed file, N tasks
submitted at once, timed from the first submit to the last result. The scrapestream side is
`bench.e2e` with the same job count. Each pair runs Celery first, then scrapestream; the last
line gives each pair's ratio and the median ratio.

    .venv/bin/python -m bench.peer_celery --lone --jobs 200 --pairs 2
    .venv/bin/python -m bench.peer_celery --lone --broker kafka --guarantee exactly_once

`--lone` submits one job at a time on both sides and compares submit→result latency (p50, p95);
`--broker`, `--guarantee` and `--workers` (worker processes sharing the partitions; Celery's side
runs two) are passed to the scrapestream side.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import celery
import urllib3

from bench import e2e
from bench.processes import Child, origin_url, own_cpu_seconds, start_origin, tree_cpu_seconds
from streams.broker.embedded import free_loopback_port

app = celery.Celery(
    "peer",
    broker=os.environ.get("PEER_REDIS_URL", "redis://127.0.0.1:6379/0"),
    backend=os.environ.get("PEER_REDIS_URL", "redis://127.0.0.1:6379/0"),
)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_acks_late=False,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)
_pool: urllib3.PoolManager | None = None


@app.task(name="peer.fetch")  # type: ignore[untyped-decorator]
def fetch(url: str) -> dict[str, object]:
    """Fetch, store content-addressed, report: what a scrapestream job does for a 2 KiB page."""
    global _pool
    if _pool is None:
        _pool = urllib3.PoolManager(maxsize=4)
    response = _pool.request("GET", url, timeout=30.0, retries=False)
    body = response.data
    digest = hashlib.sha256(body).hexdigest()
    path = Path(os.environ["PEER_ARTIFACTS"]) / digest[:2] / digest
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.part")
        temporary.write_bytes(body)
        temporary.replace(path)
    return {"status": response.status, "sha256": digest, "size": len(body)}


@contextlib.contextmanager
def running_redis(port: int, directory: Path) -> Iterator[int]:
    """A `redis-server` on loopback for the whole command (the client's pools outlive each pair);
    yields its pid."""
    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit("bench.peer_celery needs Debian's redis-server (apt-get install redis-server)")
    process = subprocess.Popen(  # noqa: S603
        [
            server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(directory), "--loglevel", "warning",
        ],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("redis-server did not start")
        yield process.pid
    finally:
        process.terminate()
        process.wait(30)


async def start_celery_worker(environment: dict[str, str], log_path: Path) -> Child:
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "celery", "-A", "bench.peer_celery", "worker",
            "-P", "prefork", "-c", "2", "--without-gossip", "--without-mingle", "--without-heartbeat",
            "--loglevel", "info",
            env=environment, stdout=log, stderr=log,
        )  # fmt: skip
    for _ in range(600):
        if b"ready." in await asyncio.to_thread(log_path.read_bytes):
            return Child("celery", process)
        if process.returncode is not None:
            break
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the Celery worker did not start; see {log_path}")


def one_at_a_time(urls: list[str]) -> tuple[list[float], list[dict[str, object]]]:
    """Each task submitted once the previous result is in: the latency a lone task sees."""
    latencies_ms, outcomes = [], []
    for url in urls:
        started = time.monotonic()
        outcomes.append(fetch.delay(url).get(timeout=60))
        latencies_ms.append((time.monotonic() - started) * 1000)
    return latencies_ms, outcomes


def run_celery(
    jobs: int, port: int, redis_pid: int, redis_url: str, *, lone: bool, hosts: int
) -> dict[str, object]:
    """N tasks at once (or one at a time) from this process; returns jobs/s (or latency) and CPU per
    job of each process."""

    async def run() -> dict[str, object]:
        directory = Path(tempfile.mkdtemp(prefix="scrapestream-peer-"))
        (directory / "artifacts").mkdir()
        environment = dict(os.environ) | {
            "PEER_REDIS_URL": redis_url,
            "PEER_ARTIFACTS": str(directory / "artifacts"),
        }
        origin = await start_origin(port, hosts)
        worker = await start_celery_worker(environment, directory / "celery.log")
        try:
            pids = {"redis": redis_pid, "origin": origin.pid, "worker": worker.pid}
            urls = [origin_url(port, hosts, n, f"c/{n}") for n in range(jobs)]
            fetch.delay(f"http://127.0.0.1:{port}/warm").get(timeout=60)
            before = {name: tree_cpu_seconds(pid) for name, pid in pids.items()} | {
                "client": own_cpu_seconds()
            }
            started = time.monotonic()
            if lone:
                latencies_ms, outcomes = await asyncio.to_thread(one_at_a_time, urls)
                submit_s = elapsed_s = time.monotonic() - started
            else:
                results = [fetch.delay(url) for url in urls]
                submit_s = time.monotonic() - started
                outcomes = [result.get(timeout=600) for result in results]
                elapsed_s = time.monotonic() - started
            after = {name: tree_cpu_seconds(pid) for name, pid in pids.items()} | {
                "client": own_cpu_seconds()
            }
        finally:
            for child in (worker, origin):
                await child.stop()
            app.backend.client.flushall()  # nothing of this run is left for the next
        assert all(outcome["status"] == 200 for outcome in outcomes)
        stored = sum(1 for _ in (directory / "artifacts").rglob("*") if _.is_file())
        assert stored >= 1
        shutil.rmtree(directory, ignore_errors=True)
        figures: dict[str, object] = {"system": "celery", "jobs": jobs}
        if lone:
            figures |= {"mode": "sequential", **e2e.latency(latencies_ms)}
        else:
            figures |= {"jobs_per_s": round(jobs / elapsed_s, 1), "submit_per_s": round(jobs / submit_s, 1)}
        return figures | e2e.cpu_per_job(before, after, jobs)

    return asyncio.run(run())


def run_scrapestream(jobs: int, arguments: argparse.Namespace) -> dict[str, object]:
    run = e2e.main(
        jobs,
        64,
        4,
        sequential=arguments.lone,
        workers=arguments.workers,
        broker_kind=arguments.broker,
        guarantee=arguments.guarantee,
        hosts=arguments.hosts,
    )
    return {"system": "scrapestream"} | asyncio.run(run)


def ratio(ours: dict[str, object], peer: dict[str, object], lone: bool) -> float:
    """Jobs/s over Celery's; for lone jobs, Celery's p50 latency over ours (above 1: faster than Celery)."""
    if lone:
        return round(float(str(peer["latency_ms_p50"])) / float(str(ours["latency_ms_p50"])), 2)
    return round(float(str(ours["jobs_per_s"])) / float(str(peer["jobs_per_s"])), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--pairs", type=int, default=2, help="Celery then scrapestream, this many times")
    parser.add_argument("--lone", action="store_true", help="one job at a time: p50 latency, not jobs/s")
    parser.add_argument("--broker", choices=["tansu", "kafka"], default="tansu")
    parser.add_argument("--guarantee", choices=["exactly_once", "at_least_once"], default=None)
    parser.add_argument("--workers", type=int, default=1, help="scrapestream workers (Celery runs 2)")
    parser.add_argument("--hosts", type=int, default=1, help="origin hosts the jobs spread over, both sides")
    arguments = parser.parse_args()
    ratios = []
    redis_port = free_loopback_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    app.conf.broker_url = app.conf.result_backend = redis_url
    with tempfile.TemporaryDirectory() as scratch, running_redis(redis_port, Path(scratch)) as redis_pid:
        for _ in range(arguments.pairs):
            port = free_loopback_port()
            peer = run_celery(
                arguments.jobs, port, redis_pid, redis_url, lone=arguments.lone, hosts=arguments.hosts
            )
            sys.stdout.write(json.dumps(peer) + "\n")
            ours = run_scrapestream(arguments.jobs, arguments)
            sys.stdout.write(json.dumps(ours) + "\n")
            sys.stdout.flush()
            ratios.append(ratio(ours, peer, arguments.lone))
    summary = {"ratios": ratios, "median_ratio": statistics.median(ratios)}
    sys.stdout.write(json.dumps(summary) + "\n")


if __name__ == "__main__":
    main()
