"""The processes a benchmark runs apart from itself: a loopback origin and `scrapestream worker`.

CPU time is read from /proc, so each process's share of a run can be reported on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

ORIGIN = """
import sys
from aiohttp import web
body = b"x" * 2048
async def page(request):
    return web.Response(body=body, content_type="text/html")
app = web.Application()
app.router.add_get("/{tail:.*}", page)
hosts = [f"127.0.0.{number}" for number in range(1, int(sys.argv[2]) + 1)]
web.run_app(app, host=hosts, port=int(sys.argv[1]), print=None, access_log=None)
"""
SCRAPESTREAM = str(Path(sys.executable).with_name("scrapestream"))
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (children that were waited for included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(fields[index]) for index in (11, 12, 13, 14))
    return (utime + stime + cutime + cstime) / TICKS


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and every live descendant (a worker's processes, a prefork pool)."""
    total = cpu_seconds(pid)
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            total += tree_cpu_seconds(int(child))
    return total


def own_cpu_seconds() -> float:
    return cpu_seconds(os.getpid())


@dataclass
class Child:
    name: str
    process: asyncio.subprocess.Process
    address: str = ""  # host:port of its HTTP server, where it has one

    @property
    def pid(self) -> int:
        return self.process.pid

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 30)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


async def start_origin(port: int, hosts: int = 1) -> Child:
    """The 2 KiB page on `port` of 127.0.0.1 and, with `hosts` above 1, of 127.0.0.2 and on."""
    return await start_server("origin", port, ORIGIN, str(port), str(hosts))


def origin_url(port: int, hosts: int, number: int, path: str) -> str:
    """The `number`th page's URL, its host one of the origin's `hosts` in turn (each a politeness key,
    so work spreads over the due partitions as many sites' would)."""
    return f"http://127.0.0.{1 + number % hosts}:{port}/{path}"


async def start_server(name: str, port: int, source: str, *arguments: str) -> Child:
    """Runs `source` as a Python program and returns once it accepts connections on `port`."""
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", source, *arguments)
    for _ in range(200):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return Child(name, process)
    raise RuntimeError(f"the {name} did not start")


async def start_worker(environment: dict[str, str], log_path: Path) -> Child:
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            SCRAPESTREAM, "worker", env=environment, stdout=asyncio.subprocess.PIPE, stderr=log
        )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 180)
    if b"serving HTTP" not in line:
        raise RuntimeError(f"the worker did not start: {line!r}; see {log_path}")
    worker = Child("worker", process, line.decode().rsplit(" ", 1)[1].strip())
    await until_ready(worker.address)
    return worker


async def until_ready(address: str) -> None:
    """Until `/readyz` answers 200: every process of the worker holds its partitions."""
    async with httpx.AsyncClient(base_url=f"http://{address}") as http:
        for _ in range(600):
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get("/readyz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"the worker at {address} did not become ready")


def worker_environment(bootstrap: str, data_dir: Path, **settings: object) -> dict[str, str]:
    values: dict[str, object] = {
        "kafka_bootstrap": bootstrap,
        "broker_profile": "embedded",
        "data_dir": data_dir,
        "web_port": 0,
        "auth_enabled": "false",
        "allow_private_networks": 1,
        "create_topics": "true",
    } | settings
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPESTREAM_")}
    return inherited | {f"SCRAPESTREAM_{name.upper()}": str(value) for name, value in values.items()}
