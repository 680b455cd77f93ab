"""A worker of N processes behind one port, until `stopped`."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from streams.settings import Settings
from streams.supervisor.children import WORKER_PREFIX, WorkerProcesses, loopback_for, worker_command
from streams.supervisor.front import Front
from streams.web.server import ApiServer


def process_environment(
    base: Mapping[str, str], settings: Settings, index: int, more: Mapping[str, object] = {}
) -> dict[str, str]:
    """The environment of process `index`: `base`, with a store of its own, a port of its own, and the
    artifact directory every process shares."""
    values: dict[str, object] = {
        "data_dir": (settings.data_dir / f"process-{index}").resolve(),
        "artifact_dir": settings.local_artifacts.resolve(),
        "web_port": 0,
        "processes": 1,
        **more,
    }
    return {**base} | {f"SCRAPESTREAM_{name.upper()}": _text(value) for name, value in values.items()}


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Supervised:
    """The processes and the front serving them; `lines` holds what the first process printed after it
    started (the job types it runs)."""

    def __init__(
        self,
        settings: Settings,
        count: int,
        environment_of: Callable[[int], dict[str, str]],
        verbose: bool,
        alone: bool = False,
    ) -> None:
        self.settings = settings
        self.count = count
        self.lines: list[str] = []
        self.server = ApiServer(
            settings.web_host, settings.web_port, settings.http_head_timeout_s, settings.http_body_timeout_s
        )
        front_url = f"http://{loopback_for(settings.web_host)}:{self.server.port}"
        command = worker_command(verbose, alone)
        self.processes = WorkerProcesses(
            count, command, environment_of, settings.shutdown_grace_s, self._echo, front_url
        )
        self.front = Front(self.processes)
        self._started = False

    def _echo(self, line: str) -> None:
        if self._started:
            sys.stdout.write(f"{line}\n")
            sys.stdout.flush()
        else:
            self.lines.append(line.removeprefix(WORKER_PREFIX))

    async def run(self, stopped: Awaitable[Any], started: Callable[[Supervised], None]) -> None:
        try:
            await self.processes.start()
            await self.server.serve(self.front)
            started(self)
            self._started = True
            await stopped
        finally:
            await self.processes.stop()
            await self.server.stop()
            await self.front.close()


def announce_worker(supervised: Supervised) -> None:
    settings = supervised.settings
    lines = [
        f"serving HTTP on {settings.web_host}:{supervised.server.port}",
        f"{supervised.count} processes (SCRAPESTREAM_PROCESSES), stores in {settings.data_dir}/process-N",
        *supervised.lines,
    ]
    sys.stdout.write("".join(f"{WORKER_PREFIX}{line}\n" for line in lines))
    sys.stdout.flush()
