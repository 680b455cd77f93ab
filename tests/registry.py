"""A real schema registry for the suite: Apicurio Registry, which serves Confluent's REST API.

Its runnable build comes from Maven Central (`tests/registry/pom.xml`); each session starts one JVM
with in-memory storage on a free loopback port.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from bench.jvm import fetched, running_service
from streams.broker.embedded import free_loopback_port
from tests.brokers import ROOT

VERSION = "2.6.13.Final"
POM = ROOT / "tests" / "registry" / "pom.xml"
RUNNER = f"apicurio-registry-app-{VERSION}-runner.jar"


@contextlib.contextmanager
def running_registry(log_path: Path) -> Iterator[str]:
    """A registry's Confluent API base URL, for as long as the context lasts."""
    home = fetched(f"apicurio-{VERSION}", POM, "dependency:unpack", RUNNER)
    port = free_loopback_port()
    arguments = ["-Xmx192m", "-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={port}", "-jar", RUNNER]
    url = f"http://127.0.0.1:{port}/apis/ccompat/v7"
    with running_service(f"the schema registry {VERSION}", home, arguments, f"{url}/subjects", log_path):
        yield url
