"""`scrapestream dev` and `scrapestream worker`: serve until Ctrl-C (SIGINT) or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys
from typing import Any

from schemas.errors import ScrapestreamError
from streams.auth.preflight import check_serving
from streams.cli.kafka import run
from streams.settings import Settings, load_settings

GC_THRESHOLDS = (20_000, 20, 20)
DEV_PARTITIONS = 1  # one process serves them all; each idle fetch asks the broker about every one


class WorkerCrashedError(ScrapestreamError):
    """A worker task died: the process exits non-zero so its supervisor restarts it."""


def serve(arguments: argparse.Namespace) -> int:
    """The cyclic garbage collector runs far less often than by default: with its default thresholds
    it took a fifth of a worker's CPU, mostly rescanning long-lived caches (docs/PERFORMANCE.md)."""
    overrides: dict[str, Any] = {}
    if arguments.command == "dev":
        overrides = {"auth_enabled": False, "s3_create_bucket": True, "create_topics": True}
        if arguments.port is not None:
            overrides["web_port"] = arguments.port
        elif "SCRAPESTREAM_WEB_PORT" not in os.environ:
            overrides["web_port"] = 0
        if arguments.allow_private:
            overrides["allow_private_networks"] = True
        if "SCRAPESTREAM_PARTITIONS" not in os.environ:
            overrides["partitions"] = DEV_PARTITIONS
    settings = load_settings(**overrides)
    check_serving(settings)
    collect_rarely()
    run(_serve(arguments.command, settings))
    return 0


def collect_rarely() -> None:
    """What is alive now stays out of every collection, and the collector runs less often."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def _serve(command: str, settings: Settings) -> None:
    stopped: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def stop() -> None:
        if not stopped.done():
            stopped.set_result(None)

    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop)
    if command == "dev":
        from streams.dev import run_dev

        await run_dev(settings, stopped)
        return
    from streams.readers.fleet import startup_lines
    from streams.worker import Worker

    worker = Worker(settings)
    await worker.start()
    sys.stdout.write(f"scrapestream worker: serving HTTP on {settings.web_host}:{worker.web_port}\n")
    for line in startup_lines(worker.fleet.own) if worker.fleet else []:
        sys.stdout.write(f"scrapestream worker: {line}\n")
    sys.stdout.flush()
    crashed = asyncio.ensure_future(worker.crashed())
    either: set[asyncio.Future[Any]] = {stopped, crashed}
    try:
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    finally:
        crashed.cancel()
        await worker.stop()
    if crashed.done() and not crashed.cancelled():
        raise WorkerCrashedError(f"the worker stopped making progress: {crashed.result()!r}")
