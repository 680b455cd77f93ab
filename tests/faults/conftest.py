"""Every fault scenario's observers are stopped after it, whatever happened; a failed scenario's
report ends with the last lines of its workers' logs (a CI run's output is all a reader gets)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.faults.scenarios import OBSERVING


@pytest_asyncio.fixture(autouse=True)
async def stop_observers() -> AsyncIterator[None]:
    yield
    while OBSERVING:
        await OBSERVING.pop().__aexit__(None, None, None)


LOG_LINES = 60


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    outcome = yield
    report = outcome.get_result()
    arguments = getattr(item, "funcargs", {})
    if report.when != "call" or not report.failed:
        return
    directory = arguments.get("tmp_path")
    found = sorted(directory.rglob("*.log")) if isinstance(directory, Path) else []
    logs = [log for log in found if not log.stem.isdigit()]  # RocksDB's write-ahead logs are binary
    cluster = arguments.get("kafka_cluster")
    logs += [node.directory / "broker.log" for node in getattr(cluster, "members", ())]
    for log in logs:
        if log.exists():
            lines = log.read_text(errors="replace").splitlines()[-LOG_LINES:]
            report.sections.append((f"last {len(lines)} lines of {log}", "\n".join(lines)))
