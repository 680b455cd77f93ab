"""What the suite runs, said before it starts (gates, brokers, browser), and a line as each phase ends."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from typing import Any

import pytest

from bench.kafka import KAFKA_VERSION
from tests.registry import VERSION as REGISTRY_VERSION

TOTALS: Counter[str] = Counter()
DONE: Counter[str] = Counter()
FAILED: Counter[str] = Counter()
SECONDS: Counter[str] = Counter()  # the tests' own time (setup, call, teardown) by the process that runs them


def phase_of(nodeid: str) -> str:
    """`tests/e2e/test_x.py::…` is of the phase `e2e`; the static gates are `static`."""
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 else "static"


def pytest_report_header(config: pytest.Config) -> list[str]:
    chosen = config.getoption("--broker")
    brokers = {"tansu": "tansu (embedded)", "kafka": f"Apache Kafka {KAFKA_VERSION} (Maven fetches it once)"}
    on = [brokers[kind] for kind in (["tansu", "kafka"] if chosen == "both" else [chosen])]
    browser = shutil.which(os.environ.get("SCRAPESTREAM_BROWSER_EXECUTABLE", "chromium"))
    absent = "none: its tests skip" + (", and fail since CI is set" if os.environ.get("CI") else "")
    return [
        "scrapestream: static gates first (ruff check, ruff format, mypy --strict, import contracts), then "
        "the unit, contract, integration, interop, end-to-end and fault phases",
        f"scrapestream: brokers {' and '.join(on)}; schema registry Apicurio {REGISTRY_VERSION}; "
        f"browser {browser or absent}",
    ]


def pytest_collection_finish(session: pytest.Session) -> None:
    if not TOTALS:
        TOTALS.update(phase_of(item.nodeid) for item in session.items)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: the controller learns what its workers collected
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    if not TOTALS:
        TOTALS.update(phase_of(nodeid) for nodeid in ids)


def group_of(nodeid: str) -> str:
    """Tests on one broker run in one process (`xdist_group`, the `@kafka` suffix); the rest share both."""
    group = nodeid.rpartition("@")[2]
    return group if "@" in nodeid and group.isidentifier() else "ungrouped"  # not an "@" in a test's id


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    SECONDS[group_of(report.nodeid)] += report.duration
    if report.when != "teardown":
        if report.failed:
            FAILED[phase_of(report.nodeid)] += 1
        return
    phase = phase_of(report.nodeid)
    DONE[phase] += 1
    if DONE[phase] == TOTALS.get(phase):
        failed = f", {FAILED[phase]} failed" if FAILED[phase] else ""
        reporter = _reporter()
        if reporter is not None:
            if reporter._tw.width_of_current_line:  # after a row of dots, on a line of its own
                reporter.write("\n")
            reporter.write_line(f"phase {phase} done: {TOTALS[phase]} tests{failed}")


def _reporter() -> Any:
    return CONFIG[0].pluginmanager.get_plugin("terminalreporter") if CONFIG else None


CONFIG: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    CONFIG.append(config)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Each broker's tests run one after another in one process: the longest of them bounds the run."""
    if SECONDS:
        spent = ", ".join(f"{group} {seconds / 60:.1f} min" for group, seconds in SECONDS.most_common())
        terminalreporter.write_line(f"scrapestream: tests' own time by process group: {spent}")
