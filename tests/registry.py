"""A real schema registry for the suite: Apicurio Registry, which serves Confluent's REST API.

Its runnable build comes from Maven Central (`tests/registry/pom.xml`) into the user's cache, once;
each session starts one JVM with in-memory storage on a free loopback port and stops it, even when
a test fails.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.kafka import CACHE
from streams.broker.embedded import free_loopback_port
from tests.brokers import ROOT

VERSION = "2.6.13.Final"
POM = ROOT / "tests" / "registry" / "pom.xml"
RUNNER = f"apicurio-registry-app-{VERSION}-runner.jar"
READY_TIMEOUT_S = 180


def fetch_registry() -> Path:
    target = CACHE / f"apicurio-{VERSION}"
    if (target / RUNNER).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f"{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be fetching it
        if not (target / RUNNER).exists():
            partial = target.with_name(target.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            command = [
                "mvn",
                "-q",
                "-B",
                "-f",
                str(POM),
                "dependency:unpack",
                "-Dmdep.overWriteReleases=true",
                f"-DoutputDirectory={partial}",
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"fetching Apicurio Registry {VERSION} failed:\n{done.stdout[-2000:]}")
            partial.rename(target)
    return target


@contextlib.contextmanager
def running_registry(log_path: Path) -> Iterator[str]:
    """A registry's Confluent API base URL, for as long as the context lasts."""
    home = fetch_registry()
    port = free_loopback_port()
    command = [
        "java",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Xmx192m",
        "-Dquarkus.http.host=127.0.0.1",
        f"-Dquarkus.http.port={port}",
        "-jar",
        str(home / RUNNER),
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=home, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy()
        )
    url = f"http://127.0.0.1:{port}/apis/ccompat/v7"
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
            raise RuntimeError(
                f"the schema registry exited ({process.returncode}):\n{log_path.read_text()[-3000:]}"
            )
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/subjects", timeout=2).status_code == 200:
                return
        time.sleep(0.3)
    raise RuntimeError(
        f"the schema registry did not answer in {READY_TIMEOUT_S} s:\n{log_path.read_text()[-3000:]}"
    )
