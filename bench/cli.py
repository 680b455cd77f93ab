"""How long the CLI takes to start and to answer, and what an idle `watch` costs.

    .venv/bin/python -m bench.cli --runs 5 --idle-s 30

Start-up: each command run where nothing is running, so it fails right after its imports, its
settings and its argument parsing (the time before it would talk to anything). Answers: the same
commands against a `scrapestream dev` started in a scratch directory. Idle watch: the CPU a
`watch` process spends over `--idle-s` seconds while no job completes. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.idle import start_dev
from bench.processes import SCRAPESTREAM, cpu_seconds, start_origin
from streams.broker.embedded import free_loopback_port


async def timed(arguments: list[str], directory: Path) -> tuple[float, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPESTREAM_")}
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        SCRAPESTREAM, *arguments, cwd=directory, env=environment,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await process.communicate()
    return time.perf_counter() - started, output.decode()


async def median_s(arguments: list[str], directory: Path, runs: int) -> float:
    return statistics.median([(await timed(arguments, directory))[0] for _ in range(runs)])


async def main(runs: int, idle_s: float) -> dict[str, object]:
    nowhere = Path(tempfile.mkdtemp(prefix="scrapestream-cli-nothing-"))
    fake = "00000000-0000-0000-0000-000000000000"
    startup = {
        name: await median_s([*arguments, "--url", "http://127.0.0.1:9"] if name != "submit" else arguments,
                             nowhere, runs)
        for name, arguments in {
            "get": ["get", fake],
            "list": ["list"],
            "events": ["events", fake],
            "submit": ["submit", "https://example.com/"],
        }.items()
    }  # fmt: skip
    port = free_loopback_port()
    origin = await start_origin(port)
    directory = Path(tempfile.mkdtemp(prefix="scrapestream-cli-"))
    dev, _ = await start_dev(directory)
    try:
        _, printed = await timed(["submit", f"http://127.0.0.1:{port}/page", "--wait"], directory)
        job_id = printed.split()[1].rstrip(":")
        answers = {
            name: await median_s(arguments, directory, runs)
            for name, arguments in {
                "get": ["get", job_id],
                "list": ["list"],
                "events": ["events", job_id],
                "submit (created or reused, decided)": ["submit", f"http://127.0.0.1:{port}/page"],
            }.items()
        }
        watch = await asyncio.create_subprocess_exec(
            SCRAPESTREAM, "watch", cwd=directory, stdout=asyncio.subprocess.DEVNULL
        )
        await asyncio.sleep(5)
        before = cpu_seconds(watch.pid)
        await asyncio.sleep(idle_s)
        spent = cpu_seconds(watch.pid) - before
        watch.terminate()
        await watch.wait()
    finally:
        await dev.stop()
        await origin.stop()
    return {
        "startup_s": {name: round(value, 3) for name, value in startup.items()},
        "answer_s": {name: round(value, 3) for name, value in answers.items()},
        "idle_watch_core_percent": round(100 * spent / idle_s, 2),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--idle-s", type=float, default=30.0)
    options = parser.parse_args()
    print(json.dumps(asyncio.run(main(options.runs, options.idle_s))))
