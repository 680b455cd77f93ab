"""A real trace backend for the suite and the benchmarks: Zipkin's server, one executable jar.

The jar comes from Maven Central (`tests/zipkin/pom.xml`) into the user's cache, once; a session
starts one JVM on a free loopback port and stops it, even when a test fails.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.kafka import CACHE
from streams.broker.embedded import free_loopback_port

ROOT = Path(__file__).resolve().parent.parent

VERSION = "3.6.1"
POM = ROOT / "tests" / "zipkin" / "pom.xml"
JAR = "zipkin-server.jar"
READY_TIMEOUT_S = 180


def fetch_zipkin() -> Path:
    target = CACHE / f"zipkin-{VERSION}"
    if (target / JAR).exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    with (target.parent / f"{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be fetching it
        if not (target / JAR).exists():
            command = ["mvn", "-q", "-B", "-f", str(POM), "dependency:copy", f"-DoutputDirectory={target}"]
            done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
            if done.returncode != 0 or not (target / JAR).exists():
                raise RuntimeError(f"fetching Zipkin {VERSION} failed:\n{done.stdout[-2000:]}")
    return target


@contextlib.contextmanager
def running_zipkin(log_path: Path) -> Iterator[str]:
    """The base URL of a Zipkin server (its API under /api/v2), for as long as the context lasts."""
    home = fetch_zipkin()
    port = free_loopback_port()
    command = [
        "java",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Xmx256m",
        "-jar",
        str(home / JAR),
        f"--server.port={port}",
        "--server.address=127.0.0.1",
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(  # noqa: S603
            command, cwd=home, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy()
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(process, url, log_path)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    give_up = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < give_up:
        if process.poll() is not None:
            raise RuntimeError(f"Zipkin exited ({process.returncode}):\n{log_path.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.3)
    raise RuntimeError(f"Zipkin did not answer in {READY_TIMEOUT_S} s:\n{log_path.read_text()[-3000:]}")
