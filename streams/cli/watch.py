"""`scrapestream watch`: completions as they are published, and what happens to the broker meanwhile.

Against `dev` it ends (exit 1) once `dev` stops, saying so; against a Kafka cluster it keeps trying,
saying once that the brokers do not answer and again when they do.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import msgspec
from rich.console import Console

from streams.cli.exits import EXIT_FAILED
from streams.cli.tables import completion_line
from streams.client import Client
from streams.clock import utc_now
from streams.devstate import read_dev_state
from streams.moments import moment_of
from streams.settings import Settings

CHECK_S = 1.0
CONNECT_TIMEOUT_S = 2.0


async def watch(
    arguments: argparse.Namespace, settings: Settings, client_of: Callable[[Settings], Client]
) -> int:
    since = None if arguments.since is None else moment_of(arguments.since, utc_now())
    async with client_of(settings) as client:
        printing = asyncio.create_task(_print(client, arguments, since))
        watching = asyncio.create_task(_dev_gone() if _on_dev() else _broker_answers(settings))
        try:
            done, _ = await asyncio.wait({printing, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (printing, watching):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if printing in done:
            return printing.result()
    sys.stderr.write("scrapestream watch: scrapestream dev stopped (its broker is gone): nothing to watch\n")
    return EXIT_FAILED


async def _print(client: Client, arguments: argparse.Namespace, since: Any) -> int:
    console = Console()
    async with contextlib.aclosing(client.completions(arguments.from_beginning, since)) as completions:
        async for completion in completions:
            document = msgspec.to_builtins(completion)
            if arguments.json:
                sys.stdout.write(json.dumps(document) + "\n")
                sys.stdout.flush()
            else:
                console.print(completion_line(document))
    return 0


def _on_dev() -> bool:
    return "SCRAPESTREAM_KAFKA_BOOTSTRAP" not in os.environ


async def _dev_gone() -> None:
    """Returns once the `dev` this directory ran has stopped."""
    while True:
        state = read_dev_state()
        if state is None or not _alive(int(state.get("pid", 0))):
            return
        await asyncio.sleep(CHECK_S)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid > 0


async def _broker_answers(settings: Settings) -> None:
    """Says on standard error when no broker answers any more, and when one answers again; never returns."""
    answering = True
    while True:
        now = await _any_answers(settings.kafka_bootstrap)
        if now != answering:
            said = "a broker answers again" if now else "no broker answers; still trying (Ctrl-C stops)"
            sys.stderr.write(f"scrapestream watch: {said} ({settings.kafka_bootstrap})\n")
            answering = now
        await asyncio.sleep(CHECK_S)


async def _any_answers(bootstrap: str) -> bool:
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                _, writer = await asyncio.open_connection(host.strip("[]"), int(port))
        except (OSError, ValueError, TimeoutError):
            continue
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True
    return False
