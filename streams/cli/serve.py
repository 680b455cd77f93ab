"""`scrapestream dev` and `scrapestream worker`: serve until Ctrl-C (SIGINT) or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from schemas.errors import ScrapestreamError
from streams.auth.preflight import check_serving
from streams.cli.kafka import run
from streams.settings import Settings, load_settings
from streams.supervisor.count import process_count

GC_THRESHOLDS = (20_000, 20, 20)


class WorkerCrashedError(ScrapestreamError):
    """A worker task died: the process exits non-zero so its supervisor restarts it."""


def serve(arguments: argparse.Namespace) -> int:
    """The cyclic garbage collector runs far less often than by default: with its default thresholds
    it took a fifth of a worker's CPU, mostly rescanning long-lived caches (docs/PERFORMANCE.md)."""
    overrides: dict[str, Any] = {}
    if arguments.processes is not None:
        overrides["processes"] = arguments.processes
    if arguments.command == "dev":
        overrides |= {"auth_enabled": False, "s3_create_bucket": True, "create_topics": True}
        if arguments.port is not None:
            overrides["web_port"] = arguments.port
        elif "SCRAPESTREAM_WEB_PORT" not in os.environ:
            overrides["web_port"] = 0
        if arguments.allow_private:
            overrides["allow_private_networks"] = True
    settings = load_settings(**overrides)
    count = 1 if arguments.supervised_as is not None else process_count(settings.processes)
    if arguments.command == "dev" and "SCRAPESTREAM_PARTITIONS" not in os.environ:
        settings = settings.model_copy(update={"partitions": count})  # one a process: none idles
    check_serving(settings)
    if count > 1 and arguments.command == "worker":
        run(_supervise(settings, count, arguments.verbose))
        return 0
    collect_rarely()
    run(_serve(arguments, settings, count))
    return 0


def collect_rarely() -> None:
    """What is alive now stays out of every collection, and the collector runs less often."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _until_signalled() -> asyncio.Future[None]:
    """Done at SIGINT or SIGTERM."""
    loop = asyncio.get_running_loop()
    stopped: asyncio.Future[None] = loop.create_future()

    def stop() -> None:
        if not stopped.done():
            stopped.set_result(None)

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop)
    return stopped


async def _until_supervisor_gone(stopped: asyncio.Future[None]) -> None:
    """For one of a worker's processes: done when its supervisor is, which holds the other end of its
    standard input (so a supervisor killed outright leaves no process behind)."""
    reader = asyncio.StreamReader()
    protocol = asyncio.StreamReaderProtocol(reader)
    await asyncio.get_running_loop().connect_read_pipe(lambda: protocol, sys.stdin)
    while await reader.read(4096):
        pass
    if not stopped.done():
        stopped.set_result(None)


async def _supervise(settings: Settings, count: int, verbose: bool) -> None:
    from streams.supervisor.run import Supervised, announce_worker, process_environment

    stopped = _until_signalled()
    base = dict(os.environ)
    supervised = Supervised(
        settings, count, lambda index: process_environment(base, settings, index), verbose
    )
    await _exit_as_the_process_did(supervised.run(stopped, announce_worker))


async def _exit_as_the_process_did(work: Coroutine[Any, Any, None]) -> None:
    from streams.supervisor.children import ProcessFailedError

    try:
        await work
    except ProcessFailedError as exc:
        if not exc.said:
            sys.stderr.write(f"scrapestream: {exc}\n")
        raise SystemExit(exc.code) from None


async def _serve(arguments: argparse.Namespace, settings: Settings, count: int) -> None:
    index = arguments.supervised_as
    stopped = _until_signalled()
    if index is not None:
        watch = asyncio.create_task(_until_supervisor_gone(stopped), name="the supervisor's pipe")
        stopped.add_done_callback(lambda _: watch.cancel())
    if arguments.command == "dev":
        from streams.dev import run_dev

        await _exit_as_the_process_did(run_dev(settings, stopped, count, arguments.verbose))
        return
    from streams.readers.fleet import startup_lines
    from streams.worker import Worker

    worker = Worker(settings, arguments.alone, arguments.front, index or 0)
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
