"""Idle cost of `scrapestream dev` and the latency of the first job after a pause.

    .venv/bin/python -m bench.idle --seconds 30
    .venv/bin/python -m bench.idle --seconds 30 --callbacks   # and what each process's loop runs

Starts `scrapestream dev` (embedded broker, worker, HTTP API) in a scratch directory, lets it
settle, then reads the CPU its process and the broker's spend while nothing is submitted. Then
submits single jobs, each after a pause, and times submit→completion. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.e2e import commands
from bench.processes import SCRAPESTREAM, Child, start_origin, tree_cpu_seconds
from streams.broker.access import plaintext
from streams.broker.compat import EMBEDDED_TANSU
from streams.broker.embedded import free_loopback_port
from streams.client import Client

SETTLE_S = 10.0
STARTS_WITHIN_S = 15.0
TOP_CALLBACKS = 10


async def start_dev(
    directory: Path, callbacks: dict[str, str] | None = None
) -> tuple[Child, dict[str, object]]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPESTREAM_")}
    environment |= {"SCRAPESTREAM_WEB_PORT": "0", "SCRAPESTREAM_ALLOW_PRIVATE_NETWORKS": "1"}
    environment |= callbacks or {}
    process = await asyncio.create_subprocess_exec(
        SCRAPESTREAM, "dev", cwd=directory, env=environment, stdout=asyncio.subprocess.DEVNULL
    )
    state_file = directory / ".scrapestream" / "dev.json"
    for _ in range(600):
        if state_file.exists():
            return Child("dev", process), json.loads(state_file.read_text())
        if process.returncode is not None:
            break
        await asyncio.sleep(0.1)
    process.kill()
    await process.wait()
    raise RuntimeError("scrapestream dev did not start")


async def main(seconds: float, pauses: int, pause_s: float, callbacks: bool = False) -> dict[str, object]:
    port = free_loopback_port()
    origin = await start_origin(port)
    directory = Path(tempfile.mkdtemp(prefix="scrapestream-idle-"))
    window = callback_window(directory, seconds) if callbacks else None
    dev, state = await start_dev(directory, window)
    try:
        pids = {"dev": dev.pid, "broker": int(str(state["broker_pid"]))}
        await asyncio.sleep(SETTLE_S)
        before = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
        await asyncio.sleep(seconds)
        after = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
        share: dict[str, object] = {
            f"idle_core_percent_{name}": round((after[name] - before[name]) * 100 / seconds, 2)
            for name in pids
        }
        counted = await counted_callbacks(directory, window) if window else {}
        latencies_ms = await after_pauses(str(state["kafka_bootstrap"]), port, pauses, pause_s)
    finally:
        await dev.stop()
        await origin.stop()
    return (
        share
        | {
            "idle_core_percent_total": round((sum(after.values()) - sum(before.values())) * 100 / seconds, 2),
            "idle_seconds": seconds,
        }
        | {
            "after_pause_s": pause_s,
            "after_pause_latency_ms_p50": round(statistics.median(latencies_ms), 1),
            "after_pause_latency_ms_max": round(max(latencies_ms), 1),
        }
        | counted
    )


def callback_window(directory: Path, seconds: float) -> dict[str, str]:
    """Settings of `bench/loop_callbacks`: every process of `dev` counts its loop's callbacks for
    `seconds`, from when the idle reading starts at the latest (the process's start takes less)."""
    starts = time.time() + STARTS_WITHIN_S + SETTLE_S
    hook = str(Path(__file__).parent / "loop_callbacks")
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [hook, os.environ.get("PYTHONPATH")])),
        "LOOP_CALLBACKS_DIR": str(directory),
        "LOOP_CALLBACKS_FROM": str(starts),
        "LOOP_CALLBACKS_UNTIL": str(starts + seconds),
    }


async def counted_callbacks(directory: Path, window: dict[str, str]) -> dict[str, object]:
    """Each process's callbacks that took the most time, once every process has written them."""
    await asyncio.sleep(max(0.0, float(window["LOOP_CALLBACKS_UNTIL"]) + 2.0 - time.time()))
    return {"callbacks_by_process": await asyncio.to_thread(callbacks_written, directory)}


def callbacks_written(directory: Path) -> dict[str, object]:
    return {
        path.stem.removeprefix("callbacks."): json.loads(path.read_text())[:TOP_CALLBACKS]
        for path in sorted(directory.glob("callbacks.*.json"))
    }


async def after_pauses(bootstrap: str, port: int, pauses: int, pause_s: float) -> list[float]:
    """Submit→completion of single jobs, each submitted after `pause_s` without any work."""
    latencies_ms: list[float] = []
    async with (
        Client(plaintext(bootstrap), EMBEDDED_TANSU) as client,
        contextlib.aclosing(client.completions(from_beginning=False)) as completions,
    ):
        for command in commands(port, pauses, "after-pause"):
            await asyncio.sleep(pause_s)
            started = time.monotonic()
            job_id = await client.submit(command)
            async for completion in completions:
                if completion.job_id == job_id:
                    break
            latencies_ms.append((time.monotonic() - started) * 1000)
    return latencies_ms


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the idle CPU is read")
    parser.add_argument("--pauses", type=int, default=5, help="single jobs submitted after a pause")
    parser.add_argument("--pause", type=float, default=5.0, help="seconds of idleness before each")
    parser.add_argument(
        "--callbacks",
        action="store_true",
        help="each process's event-loop callbacks by time spent (on the standard loop: uvloop kept out)",
    )
    arguments = parser.parse_args()
    result = asyncio.run(main(arguments.seconds, arguments.pauses, arguments.pause, arguments.callbacks))
    sys.stdout.write(json.dumps(result) + "\n")
