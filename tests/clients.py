"""The outside teams' clients, built or installed as each team would, once a session: Java by Maven
(classes generated from the bundle), Node by npm from its pinned lock file."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.brokers import ROOT, kafka_or_skip

INTEROP = ROOT / "tests" / "interop"
JAVA_POM = INTEROP / "java" / "pom.xml"
NODE = INTEROP / "node"


@pytest.fixture(scope="session")
def java_client() -> list[str]:
    """The Java client built by Maven, as its team would (classes generated from the bundle)."""
    kafka_or_skip()
    subprocess.run(["mvn", "-q", "-B", "-f", str(JAVA_POM), "package"], check=True, timeout=900)
    target = JAVA_POM.parent / "target"
    classpath = f"{target / 'classes'}:{(target / 'classpath.txt').read_text().strip()}"
    return ["java", "-cp", classpath, "interop.Interop"]


@pytest.fixture(scope="session")
def node_client() -> list[str]:
    """The Node client with its pinned packages from npm (`package-lock.json`), as its team installs it."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI needs {' and '.join(missing)} for the Node client")
    if missing:
        pytest.skip(f"the Node client needs {' and '.join(missing)}")
    subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE, check=True, capture_output=True, timeout=600
    )
    return ["node", str(NODE / "client.mjs")]
