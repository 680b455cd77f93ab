"""A worker of several processes, as `scrapestream worker --processes N` runs it: one port speaks for
all of them, a process that dies is restarted and named in the log, SIGTERM stops every one."""

from __future__ import annotations

import asyncio
import os
import signal

import httpx
import pytest

from bench.processes import until_ready
from schemas.enums import JobStatus
from tests.faults.harness import WorkerProcess, settings_of, worker_environment, workers
from tests.faults.origins import hostile_origin
from tests.faults.scenarios import all_terminal, observe, prefix, until

pytestmark = [pytest.mark.asyncio(loop_scope="function"), pytest.mark.timeout(300)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def processes_of(http: httpx.AsyncClient) -> list[dict[str, object]]:
    return list((await http.get("/processes")).json()["processes"])


async def test_one_port_speaks_for_every_process_and_a_killed_one_comes_back(broker, tmp_path):
    environment = worker_environment(broker.bootstrap, prefix(), tmp_path / "worker", processes=2)
    worker = WorkerProcess(environment)
    async with hostile_origin() as origin, workers(worker):
        await worker.start()
        system = await observe(settings_of(environment))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}", timeout=30) as http:
            await until_ready(f"127.0.0.1:{worker.web_port}")
            first = await processes_of(http)
            assert [p["state"] for p in first] == ["serving", "serving"]
            pids = [int(str(p["pid"])) for p in first]
            assert len(set(pids)) == 2
            assert os.getpid() not in pids
            assert (await http.get("/healthz")).json()["owned_partitions"] == [0, 1]
            metrics = (await http.get("/metrics")).text
            assert 'process="0"' in metrics
            assert 'process="1"' in metrics
            assert metrics.count("# TYPE process_resident_memory_bytes gauge") == 1
            overview = (await http.get("/overview")).json()  # the console's overview, from either process
            assert [p["pid"] for p in overview["cluster"]["processes"]] == pids

            before = [await system.submit(origin.url("page", f"before-{n}")) for n in range(8)]
            await all_terminal(system, before)
            for job_id in before:  # each read through the one port, whichever process owns the job
                assert (await http.get(f"/jobs/{job_id}")).json()["state"] == "SUCCEEDED"

            os.kill(pids[1], signal.SIGKILL)

            async def restarted() -> list[dict[str, object]]:
                while True:
                    now = await processes_of(http)
                    if now[1]["restarts"] == 1 and now[1]["state"] == "serving":
                        return now
                    await asyncio.sleep(0.2)

            after_kill = await asyncio.wait_for(restarted(), 120)
            assert after_kill[1]["last_exit"].startswith("was killed by SIGKILL")
            assert after_kill[0]["pid"] == pids[0]
            await until_ready(f"127.0.0.1:{worker.web_port}")
            after = [await system.submit(origin.url("page", f"after-{n}")) for n in range(8)]
            await all_terminal(system, after)
            children = [int(str(p["pid"])) for p in after_kill]

        await worker.stop()
        assert worker.process is not None
        assert worker.process.returncode == 0
        await until(lambda: not any(alive(pid) for pid in children), 10)
    statuses = {c.job_id: c.status for c in system.completions.records}
    assert {statuses[job_id] for job_id in before + after} == {JobStatus.SUCCEEDED}
    log = (worker.data_dir / "worker-1.log").read_text()
    assert f"worker process 1 (pid {pids[1]}) was killed by SIGKILL" in log
    assert log.count("SCRAPESTREAM_CALLBACK_SECRET is not set") == 1  # once a worker, not once a process


async def test_a_worker_killed_outright_leaves_none_of_its_processes_running(broker, tmp_path):
    environment = worker_environment(broker.bootstrap, prefix(), tmp_path / "worker", processes=2)
    worker = WorkerProcess(environment)
    async with workers(worker):
        await worker.start()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}", timeout=30) as http:
            children = [int(str(p["pid"])) for p in await processes_of(http)]
        assert worker.process is not None
        worker.process.kill()  # the supervisor alone, as the OOM killer may pick it
        await worker.wait_dead()
        await until(lambda: not any(alive(pid) for pid in children), 30)
