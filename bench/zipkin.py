"""A real trace backend for the suite and the benchmarks: Zipkin's server, one executable jar from
Maven Central (`tests/zipkin/pom.xml`), on a free loopback port, in memory."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from bench.jvm import fetched, running_service
from streams.broker.embedded import free_loopback_port

ROOT = Path(__file__).resolve().parent.parent

VERSION = "3.6.1"
POM = ROOT / "tests" / "zipkin" / "pom.xml"
JAR = "zipkin-server.jar"


@contextlib.contextmanager
def running_zipkin(log_path: Path) -> Iterator[str]:
    """The base URL of a Zipkin server (its API under /api/v2), for as long as the context lasts."""
    home = fetched(f"zipkin-{VERSION}", POM, "dependency:copy", JAR)
    port = free_loopback_port()
    arguments = ["-Xmx256m", "-jar", JAR, f"--server.port={port}", "--server.address=127.0.0.1"]
    url = f"http://127.0.0.1:{port}"
    with running_service(f"Zipkin {VERSION}", home, arguments, f"{url}/health", log_path):
        yield url
