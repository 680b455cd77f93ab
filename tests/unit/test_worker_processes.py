"""The supervisor's processes, with small Python programs standing in for the worker: what it does when
one serves and dies, dies before serving, never serves, or ignores SIGTERM."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from streams.supervisor import children
from streams.supervisor.children import ProcessFailedError, WorkerProcesses

pytestmark = pytest.mark.asyncio(loop_scope="function")
SERVES = "import sys, time; print('scrapestream worker: serving HTTP on 127.0.0.1:9', flush=True); "


def processes(program: str, count: int = 1, grace_s: float = 0.5) -> WorkerProcesses:
    return WorkerProcesses(
        count,
        [sys.executable, "-c", program],
        lambda _: dict(os.environ),
        grace_s,
        lambda _: None,
        "http://x",
    )


async def test_a_process_that_dies_after_serving_is_restarted_and_its_exit_named(monkeypatch):
    monkeypatch.setattr(children, "FIRST_BACKOFF_S", 0.05)
    running = processes(SERVES + "time.sleep(0.3); sys.exit(3)")
    await running.start()
    try:
        async with asyncio.timeout(30):
            while running.processes[0].restarts < 2:  # noqa: ASYNC110 - counted by the supervisor's task
                await asyncio.sleep(0.05)
        view = running.processes[0].view()
        assert view["last_exit"].startswith("exited with code 3 after ")
    finally:
        await running.stop()
    assert running.processes[0].view()["state"] == "stopped"


async def test_a_process_that_exits_before_serving_fails_the_start_with_its_code():
    running = processes("import sys; sys.exit(2)")
    with pytest.raises(ProcessFailedError, match="exited with code 2 before it served") as failed:
        await running.start()
    assert failed.value.code == 2
    await running.stop()


async def test_a_process_that_never_serves_is_killed(monkeypatch):
    monkeypatch.setattr(children, "START_WITHIN_S", 0.5)
    running = processes("import time; time.sleep(60)")
    with pytest.raises(ProcessFailedError, match="did not serve within"):
        await running.start()
    process = running.processes[0].process
    assert process is not None
    assert await asyncio.wait_for(process.wait(), 10) == -9
    await running.stop()


async def test_stop_kills_what_outlives_the_grace(monkeypatch):
    monkeypatch.setattr(children, "KILL_WAIT_S", 0.2)
    program = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); " + SERVES + "time.sleep(60)"
    running = processes(program, count=2, grace_s=0.2)
    await running.start()
    await asyncio.wait_for(running.stop(), 10)
    assert [child.process.returncode for child in running.processes if child.process] == [-9, -9]


async def test_a_stop_during_a_restart_ends_the_process_being_started(monkeypatch):
    monkeypatch.setattr(children, "FIRST_BACKOFF_S", 0.01)
    started: list[asyncio.subprocess.Process] = []
    restarting = asyncio.Event()
    create = asyncio.create_subprocess_exec

    async def slow_to_start(*command: str, **options: object) -> asyncio.subprocess.Process:
        process = await create(*command, **options)  # type: ignore[arg-type]
        started.append(process)
        if len(started) > 1:
            restarting.set()
            await asyncio.sleep(1)  # the stop lands here, while the restart's spawn is under way
        return process

    monkeypatch.setattr(children.asyncio, "create_subprocess_exec", slow_to_start)
    running = processes(SERVES + "time.sleep(0.2); sys.exit(3)")
    await running.start()
    await asyncio.wait_for(restarting.wait(), 30)
    await asyncio.wait_for(running.stop(), 10)
    assert [process.returncode is not None for process in started] == [True, True]


async def test_what_every_process_prints_after_its_start_reaches_the_terminal_its_start_lines_once():
    echoed: list[str] = []
    program = (
        SERVES
        + "print('scrapestream worker: consumer group g', flush=True); "
        + "import os; print(f'span decide pid={os.getpid()}', flush=True); time.sleep(60)"
    )
    running = WorkerProcesses(
        2, [sys.executable, "-c", program], lambda _: dict(os.environ), 0.5, echoed.append, ""
    )
    await running.start()
    try:
        async with asyncio.timeout(30):
            while sum(line.startswith("span decide") for line in echoed) < 2:  # noqa: ASYNC110 - read by its tasks
                await asyncio.sleep(0.05)
    finally:
        await running.stop()
    pids = {str(child.process.pid) for child in running.processes if child.process}
    assert {line.rpartition("=")[2] for line in echoed if line.startswith("span decide")} == pids
    assert echoed.count("scrapestream worker: consumer group g") == 1
