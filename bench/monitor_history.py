"""What one monitor costs after few checks and after many: its store folds a checkpoint and the few
events since, so the cost does not grow with its history.

    .venv/bin/python -m bench.monitor_history --checks 100000

Two monitors of one RocksDB `JobStore` check a page that changes at every check, through `decide`
(what the lifecycle agent does, without Kafka): one 10 times, the other `--checks` times. Then, for
each, in turn so both see the same store and the same machine: a cache-miss fold, its snapshot
entry's bytes, and the store work of `GET /monitors/{id}`, `/checks` and `/changes` (pages of 10, as
many as there are after 10 checks: the handlers' reads and JSON, not HTTP). Each time is the median
of `--reads` runs. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from projections.jobstore import JobStore
from projections.lifecycle.decide import decide
from projections.lifecycle.evolve import replay
from projections.lifecycle.monitors import monitor_id_for
from projections.lifecycle.policy import ExecutionProfile, Policy
from projections.lifecycle.state import Monitor, State
from projections.monitor_views import change_views, check_views, monitor_view, newest_views
from projections.storage.rocks import RocksStore
from schemas.commands import CheckTimers, Command, CreateMonitor, RecordCheck, ReportCheckReading
from schemas.enums import AttemptOutcome, JobStatus
from schemas.records import Artifact, MonitorSchedule, MonitorSpec, Request

START = datetime(2026, 1, 1, tzinfo=UTC)
EVERY = timedelta(seconds=10)
PAGE = 10  # what a monitor has after 10 checks: both pages list as many
POLICY = Policy(profiles={"http.fetch": ExecutionProfile(30_000, 3)}, first_check_spread_s=0)


def artifact(check: int) -> Artifact:
    digest = f"{check:064x}"
    return Artifact(
        artifact_id=UUID(int=check + 1),
        key=f"sha256/{digest}",
        content_type="text/html",
        size_bytes=2048,
        sha256=digest,
    )


class Log:
    """The events partition both monitors' events are folded from, a commit per command."""

    def __init__(self, path: Path) -> None:
        self.store = JobStore(RocksStore(path), POLICY)
        self.offset = 0


class Watched:
    """One monitor and its state, its commands decided and folded into the shared store."""

    def __init__(self, log: Log, name: str) -> None:
        self.log, self.store = log, log.store
        self.monitor_id = monitor_id_for("svc-a", name)
        self.state: State = None
        self.checks = 0
        page = Request(url=f"https://example.com/{name}")
        spec = MonitorSpec(request=page, schedule=MonitorSchedule(every_s=10))
        self._run(CreateMonitor(command_id=uuid4(), caller_identity="svc-a", name=name, spec=spec), START)

    def _run(self, command: Command, at: datetime) -> None:
        events = decide(self.state, command, at, POLICY)
        self.state = replay(events, self.state)
        self.log.offset += len(events)
        self.store.commit(0, events, self.log.offset)

    def check(self) -> None:
        """One check: due, fetched with new content, read as changed."""
        at = START + EVERY * self.checks
        self._run(CheckTimers(command_id=uuid4(), job_id=self.monitor_id), at)
        assert isinstance(self.state, Monitor)
        assert self.state.pending is not None
        job_id = self.state.pending.check_job_id
        fetched = RecordCheck(
            monitor_id=self.monitor_id,
            command_id=uuid4(),
            check_job_id=job_id,
            status=JobStatus.SUCCEEDED,
            outcome=AttemptOutcome.FETCHED,
            http_status=200,
            artifacts=(artifact(self.checks),),
        )
        self._run(fetched, at)
        reading = ReportCheckReading(
            monitor_id=self.monitor_id,
            command_id=uuid4(),
            check_job_id=job_id,
            fingerprint=f"f{self.checks}",
            diff=f"-price {self.checks}\n+price {self.checks + 1}\n",
            lines_added=1,
            lines_removed=1,
        )
        self._run(reading, at)
        self.checks += 1

    def readings(self) -> dict[str, Callable[[], None]]:
        store, monitor_id = self.store, self.monitor_id

        def fold() -> None:
            store.forget_cached()
            store.load(monitor_id)

        def get() -> None:
            state = store.load(monitor_id)
            assert isinstance(state, Monitor)
            monitor_view(state).model_dump_json()

        def checks() -> None:
            kept, older = store.events_of(monitor_id), store.older_checks(monitor_id)
            views = newest_views(check_views(kept), older, lambda v: v.recorded_at, None, PAGE)
            json.dumps([view.model_dump(mode="json") for view in views])

        def changes() -> None:
            kept, older = store.events_of(monitor_id), store.older_changes(monitor_id)
            views = newest_views(change_views(kept), older, lambda v: v.detected_at, None, PAGE)
            json.dumps([view.model_dump(mode="json") for view in views])

        return {"fold": fold, "get": get, "checks_page": checks, "changes_page": changes}

    def snapshot_bytes(self) -> int:
        entry = self.store.snapshot_cut(0, 1_000).jobs.get(self.monitor_id, [])
        return sum(len(value) for value in entry)


def measured(few: Watched, many: Watched, reads: int) -> dict[str, Any]:
    """Median milliseconds of each reading of both monitors, taken in turn."""
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(reads):
        for label, watched in (("few", few), ("many", many)):
            for name, work in watched.readings().items():
                started = time.perf_counter()
                work()
                times.setdefault((label, name), []).append(time.perf_counter() - started)
    result: dict[str, Any] = {"few": {"checks": few.checks}, "many": {"checks": many.checks}}
    for (label, name), taken in times.items():
        result[label][f"{name}_ms"] = round(statistics.median(taken) * 1000, 4)
    for label, watched in (("few", few), ("many", many)):
        result[label]["snapshot_bytes"] = watched.snapshot_bytes()
        result[label]["stored_events"] = len(watched.store.events_of(watched.monitor_id))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checks", type=int, default=100_000)
    parser.add_argument("--reads", type=int, default=200)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        log = Log(Path(scratch) / "store")
        few, many = Watched(log, "few"), Watched(log, "many")
        for _ in range(10):
            few.check()
        started = time.perf_counter()
        while many.checks < arguments.checks:
            many.check()
        folding_s = time.perf_counter() - started
        result = measured(few, many, arguments.reads)
    compared = [key for key in result["few"] if key.endswith("_ms") or key == "snapshot_bytes"]
    result["many_over_few"] = {key: round(result["many"][key] / result["few"][key], 3) for key in compared}
    result["checks_per_s"] = round(many.checks / folding_s, 1)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
