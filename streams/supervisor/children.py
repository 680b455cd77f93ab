"""The worker processes: started, watched, restarted with backoff when one dies, stopped together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from schemas.errors import ScrapestreamError
from streams.clock import utc_now
from streams.runtime.resident import resident_bytes

log = logging.getLogger(__name__)
SERVING = b"serving HTTP on "
WORKER_PREFIX = "scrapestream worker: "  # what every process prints as it starts: echoed once
START_WITHIN_S = 180.0
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0
STEADY_AFTER_S = 60.0  # a process that ran this long starts its backoff afresh when it dies
KILL_WAIT_S = 5.0
State = Literal["starting", "serving", "restarting", "stopped"]


class ProcessFailedError(ScrapestreamError):
    """A worker process exited before it ever served: its settings or its broker are wrong, and a
    restart would fail the same way. Carries the exit code the supervisor exits with."""

    def __init__(self, message: str, code: int, said: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.said = said  # the process printed why itself: nothing to add


def exit_named(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return "exited cleanly (code 0)" if returncode == 0 else f"exited with code {returncode}"


def backoff_s(failures: int) -> float:
    """The wait before restarting a process that died `failures` times in a row (1 the first time)."""
    return float(min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** max(0, failures - 1)))


@dataclass
class WorkerProcess:
    index: int
    state: State = "starting"
    process: asyncio.subprocess.Process | None = None
    url: str | None = None
    started_at: datetime | None = None
    started_monotonic: float = 0.0
    restarts: int = 0
    failures: int = 0
    last_exit: str | None = None
    serving: asyncio.Event = field(default_factory=asyncio.Event)

    def view(self) -> dict[str, Any]:
        pid = None if self.process is None or self.process.returncode is not None else self.process.pid
        return {
            "index": self.index,
            "pid": pid,
            "state": self.state,
            "url": self.url,
            "started_at": None if self.started_at is None else self.started_at.isoformat(),
            "restarts": self.restarts,
            "last_exit": self.last_exit,
            "resident_bytes": None if pid is None else resident_bytes(pid),
        }


class WorkerProcesses:
    """`count` processes of `command`, the i-th with `environment_of(i)`; its stdout's first line says
    where it serves, its stderr (the log) is this process's."""

    def __init__(
        self,
        count: int,
        command: list[str],
        environment_of: Callable[[int], dict[str, str]],
        grace_s: float,
        echo: Callable[[str], None],
        front_url: str,
    ) -> None:
        self.front_url = front_url
        self.processes = [WorkerProcess(index) for index in range(count)]
        self._command = command
        self._environment_of = environment_of
        self._grace_s = grace_s
        self._echo = echo
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Returns once every process serves; raises `ProcessFailedError` if one exits first."""
        for child in self.processes:  # one after the other: members joining a group at once can
            await self._until_serving(child, await self._spawn(child))  # rebalance for a minute on Kafka
        self._tasks += [
            asyncio.create_task(self._keep(child, child.process), name=f"worker process {child.index}")
            for child in self.processes
            if child.process is not None
        ]

    def serving(self) -> list[WorkerProcess]:
        return [child for child in self.processes if child.state == "serving" and child.url is not None]

    async def stop(self) -> None:
        """SIGTERM to each; what still runs after the shutdown grace (and a margin) is killed."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)  # a restart's spawn records its process
        running = [c.process for c in self.processes if c.process and c.process.returncode is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        waits = [asyncio.ensure_future(process.wait()) for process in running]
        if waits:
            _, late = await asyncio.wait(waits, timeout=self._grace_s + KILL_WAIT_S)
            for process in running:
                if process.returncode is None:
                    log.warning("worker process (pid %d) still runs after the grace: killing it", process.pid)
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
            if late:
                await asyncio.wait(late)
        for child in self.processes:
            child.state = "stopped"

    async def _spawn(self, child: WorkerProcess) -> asyncio.subprocess.Process:
        child.state, child.url = "starting", None
        child.serving.clear()
        child.started_at, child.started_monotonic = utc_now(), time.monotonic()
        creating = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *self._command,
                "--supervised-as",
                str(child.index),
                "--front",
                self.front_url,
                env=self._environment_of(child.index),
                stdin=asyncio.subprocess.PIPE,  # closed when this process dies: the child then stops
                stdout=asyncio.subprocess.PIPE,
            )
        )
        try:
            process = child.process = await asyncio.shield(creating)
        except asyncio.CancelledError:
            child.process = await creating  # stopped while it started: `stop` still ends it
            raise
        self._tasks.append(
            asyncio.create_task(self._read_output(child, process), name=f"output of process {child.index}")
        )
        return process

    async def _read_output(self, child: WorkerProcess, process: asyncio.subprocess.Process) -> None:
        first_start = child.restarts == 0
        if process.stdout is None:
            return
        async for line in process.stdout:
            if SERVING in line and child.url is None:
                address = line.split(SERVING, 1)[1].decode().strip()
                host, _, port = address.rpartition(":")
                child.url = f"http://{loopback_for(host)}:{port}"
                child.state = "serving"
                child.serving.set()
            elif (first_start and child.index == 0) or not line.startswith(WORKER_PREFIX.encode()):
                self._echo(line.decode(errors="replace").rstrip("\n"))  # spans: every process's

    async def _until_serving(self, child: WorkerProcess, process: asyncio.subprocess.Process) -> None:
        exited = asyncio.ensure_future(process.wait())
        served = asyncio.ensure_future(child.serving.wait())
        try:
            done, _ = await asyncio.wait(
                {exited, served}, timeout=START_WITHIN_S, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            served.cancel()
        if served in done or child.serving.is_set():
            exited.cancel()
            return
        if exited in done:
            code = process.returncode or 1
            raise ProcessFailedError(
                f"worker process {child.index} {exit_named(process.returncode or 0)} before it served",
                code if code > 0 else 1,
                said=code > 0,
            )
        exited.cancel()
        with contextlib.suppress(ProcessLookupError):
            process.kill()  # stuck: killed, so the next wait sees it end and restarts it
        message = f"worker process {child.index} did not serve within {START_WITHIN_S:.0f} s: killed"
        raise ProcessFailedError(message, 1)

    async def _keep(self, child: WorkerProcess, process: asyncio.subprocess.Process) -> None:
        """Restarts `child` whenever it dies, until `stop`."""
        while not self._stopping:
            returncode = await process.wait()
            if self._stopping:
                return
            ran_s = time.monotonic() - child.started_monotonic
            child.failures = 1 if ran_s >= STEADY_AFTER_S else child.failures + 1
            child.last_exit = f"{exit_named(returncode)} after {ran_s:.1f} s"
            child.state, child.url = "restarting", None
            wait_s = backoff_s(child.failures)
            log.error(
                "worker process %d (pid %d) %s; restarting it in %.1f s",
                child.index,
                process.pid,
                child.last_exit,
                wait_s,
            )
            await asyncio.sleep(wait_s)
            if self._stopping:
                return
            child.restarts += 1
            process = await self._spawn(child)
            with contextlib.suppress(ProcessFailedError):
                await self._until_serving(child, process)  # one that fails again is seen by the next wait


def loopback_for(host: str) -> str:
    """Where this machine reaches a process bound to `host`."""
    if host in ("", "0.0.0.0"):  # noqa: S104 - a comparison, not a bind
        return "127.0.0.1"
    if host in ("::", "[::]"):
        return "[::1]"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def worker_command(verbose: bool, alone: bool) -> list[str]:
    """`alone`: the processes are the only workers on their broker (`dev`)."""
    flags = [*(["-v"] if verbose else []), "worker", *(["--alone"] if alone else [])]
    return [sys.executable, "-m", "streams.cli.main", *flags]
