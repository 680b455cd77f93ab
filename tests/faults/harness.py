"""Real worker processes for fault scenarios, and the invariants every scenario must keep.

Invariants, checked on what a user observes (the events and completions topics, the origin):
- every accepted job ends in exactly one completion once consumers dedupe by job id;
- no job has two terminal events; sequences per job have no gaps and no conflicting duplicates;
- each worker's store equals a replay of the log (`streams.readers.replay.verify`);
- no origin sees more requests for a job than its attempt limit plus the crash window
  (one more request per kill that interrupted the job's fetch).
Counts go to the JSON-lines file named by `SCRAPESTREAM_FAULT_REPORT`, for docs/RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
from prometheus_client.parser import text_string_to_metric_families

from schemas.enums import JobStatus
from schemas.events import JobAccepted, JobCancelled, JobCompleted, JobDeadLettered, JobSucceeded
from streams.readers.replay import verify
from streams.settings import Settings, load_settings
from tests.brokers import profile, profile_name

SCRAPESTREAM = str(Path(sys.executable).with_name("scrapestream"))
TERMINAL = (JobSucceeded, JobDeadLettered, JobCancelled)
READY_TIMEOUT_S = 180.0  # a worker of several processes starts them one after another


def worker_environment(bootstrap: str, prefix: str, data_dir: Path, **settings: Any) -> dict[str, str]:
    values: dict[str, Any] = {
        "kafka_bootstrap": bootstrap,
        "broker_profile": profile_name(bootstrap),
        "create_topics": "true",
        "data_dir": data_dir,
        "web_port": 0,
        "auth_enabled": "false",
        "partitions": 2,
        "topic_prefix": prefix,
        "group_id": prefix,
        "allow_private_networks": "1",
        "profiles": json.dumps({"http.fetch": [2_000, 5]}),
        "lease_grace_ms": 1_000,
        "start_window_ms": 5_000,
        "retry_base_ms": 300,
        "executor_concurrency": 4,
        "callback_retry_base_s": 0.3,
        "callback_timeout_s": 2,
        "shutdown_grace_s": 1,
        "processes": 1,  # the scenarios the issue names run `auto`; one process keeps the rest quick
    } | settings
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPESTREAM_")}
    return inherited | {f"SCRAPESTREAM_{name.upper()}": str(value) for name, value in values.items()}


def settings_of(environment: dict[str, str]) -> Settings:
    """The settings a worker started with `environment` runs with."""
    prefix = "SCRAPESTREAM_"
    values = {k[len(prefix) :].lower(): v for k, v in environment.items() if k.startswith(prefix)}
    for name in (
        "profiles",
        "allowed_networks",
        "policy_classes",
        "host_limits",
    ):  # JSON, as the worker reads
        if name in values:
            values[name] = json.loads(values[name])
    return load_settings(**values)


@dataclass
class WorkerProcess:
    """`scrapestream worker` as production runs it; its log is kept for a failing test's report."""

    environment: dict[str, str]
    name: str = "worker"
    process: asyncio.subprocess.Process | None = None
    web_port: int = 0
    starts: int = 0

    @property
    def data_dir(self) -> Path:
        return Path(self.environment["SCRAPESTREAM_DATA_DIR"])

    async def start(self) -> WorkerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        log = (self.data_dir / f"{self.name}-{self.starts}.log").open("wb")
        self.process = await asyncio.create_subprocess_exec(
            SCRAPESTREAM,
            "-v",
            "worker",
            env=self.environment,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            start_new_session=True,  # its process group is the worker with all of its processes
        )
        log.close()
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), READY_TIMEOUT_S)
        assert b"serving HTTP" in line, f"{self.name} did not start: {line!r}; see {self.data_dir}"
        self.web_port = int(line.rsplit(b":", 1)[1])
        return self

    def kill(self) -> None:
        """SIGKILL to every process of the worker, as a container runtime or the OOM killer of a
        cgroup ends it."""
        self._signal_all(signal.SIGKILL)

    def pause(self) -> None:
        """SIGSTOP: the processes keep their connections and their state, and do nothing."""
        self._signal_all(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal_all(signal.SIGCONT)

    def _signal_all(self, signum: signal.Signals) -> None:
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signum)

    async def metric(self, sample: str) -> float:
        """The sum of the /metrics samples named `sample` (`name` or `name{label="value",…}`) over every
        other label, the worker's processes' included (0 when there is none)."""
        name, _, wanted = sample.partition("{")
        labels = dict(re.findall(r'(\w+)="([^"]*)"', wanted))
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://127.0.0.1:{self.web_port}/metrics")).text
        return sum(
            found.value
            for family in text_string_to_metric_families(text)
            for found in family.samples
            if found.name == name and labels.items() <= found.labels.items()
        )

    async def stop(self) -> None:
        process = self.process
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 60)
        except TimeoutError:
            process.kill()
            await process.wait()

    async def wait_dead(self) -> None:
        if self.process is not None:
            await self.process.wait()

    async def owned(self) -> list[int]:
        async with httpx.AsyncClient() as http:
            health = (await http.get(f"http://127.0.0.1:{self.web_port}/healthz")).json()
        return list(health["owned_partitions"])


@contextlib.asynccontextmanager
async def workers(*processes: WorkerProcess):  # type: ignore[no-untyped-def]
    """Stops every worker at the end, whatever happened."""
    try:
        yield processes
    finally:
        for process in processes:
            process.resume()
            process.kill()
            await process.wait_dead()


@dataclass
class FaultCounts:
    scenario: str
    jobs: int = 0
    completed: int = 0
    duplicate_completions: int = 0
    lost: int = 0
    duplicate_events_in_log: int = 0
    max_requests_per_job: int = 0
    requests_over_budget: int = 0
    dead_input: int = 0
    recovery_s: list[float] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)


def check_log(
    scenario: str,
    job_ids: Iterable[UUID],
    events: list[Any],
    completions: list[Any],
    requests: dict[UUID, int] | None = None,
    attempt_limit: int = 5,
    crash_window: int = 0,
) -> FaultCounts:
    """Assert the invariants over the observed topics; return the counts for the report."""
    jobs = list(job_ids)
    counts = FaultCounts(scenario, jobs=len(jobs))
    by_job: dict[UUID, dict[int, set[UUID]]] = defaultdict(lambda: defaultdict(set))
    for event in events:
        by_job[event.job_id][event.sequence].add(event.event_id)
    seen = Counter((e.job_id, e.sequence) for e in events)
    counts.duplicate_events_in_log = sum(n - 1 for n in seen.values() if n > 1)
    accepted = {e.job_id for e in events if isinstance(e, JobAccepted)}
    finished = defaultdict(set)
    for completion in completions:
        if isinstance(completion, JobCompleted) and completion.status is not JobStatus.REJECTED:
            finished[completion.job_id].add(completion.status)
    raw_completions = Counter(c.job_id for c in completions if isinstance(c, JobCompleted))
    terminal_events: dict[UUID, set[UUID]] = defaultdict(set)
    for event in events:
        if isinstance(event, TERMINAL):
            terminal_events[event.job_id].add(event.event_id)
    for job_id in jobs:
        sequences = by_job[job_id]
        conflicting = {seq: ids for seq, ids in sequences.items() if len(ids) > 1}
        assert not conflicting, f"job {job_id} has conflicting events at sequences {sorted(conflicting)}"
        assert sorted(sequences) == list(range(1, len(sequences) + 1)), f"job {job_id} has a gap"
        terminal = terminal_events[job_id]
        assert len(terminal) <= 1, f"job {job_id} has {len(terminal)} terminal events"
        if job_id in accepted:
            assert len(finished[job_id]) == 1, f"job {job_id} ended {finished[job_id] or 'never'}"
            counts.completed += 1
            counts.duplicate_completions += raw_completions[job_id] - 1
        if requests is not None:
            made = requests.get(job_id, 0)
            counts.max_requests_per_job = max(counts.max_requests_per_job, made)
            counts.requests_over_budget += max(0, made - attempt_limit)
            assert made <= attempt_limit + crash_window, f"job {job_id}: {made} requests"
    counts.lost = len([j for j in jobs if j in accepted and not finished[j]])
    return counts


async def assert_stores_match_the_log(environments: Iterable[dict[str, str]], observed: Any = None) -> None:
    """Each worker's lifecycle store is what a replay of the events topic rebuilds (bit for bit)."""
    for environment in environments:
        for settings in _stores_of(settings_of(environment)):
            await _assert_store_matches_the_log(settings, observed)


def _stores_of(settings: Settings) -> list[Settings]:
    """A worker of several processes keeps a store in each one's directory."""
    directories = sorted(settings.data_dir.glob("process-*")) or [settings.data_dir]
    return [settings.model_copy(update={"data_dir": directory}) for directory in directories]


async def _assert_store_matches_the_log(settings: Settings, observed: Any) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        difference = await verify(
            settings, profile(settings.kafka_bootstrap), settings.policy(), Path(scratch) / "rebuilt"
        )
    if difference is not None and observed is not None:
        job = difference.key.decode(errors="replace").rsplit("/", 1)[-1]
        log = [
            (raw.partition, raw.offset, type(event).__name__, event.sequence, str(event.occurred_at))
            for raw, event in zip(observed.raw, observed.records, strict=True)
            if str(event.job_id) == job
        ]
        raise AssertionError(f"{settings.data_dir}: {difference.describe()}; log: {log}")
    assert difference is None, f"{settings.data_dir}: {difference.describe()}"


def report(counts: FaultCounts) -> None:
    target = os.environ.get("SCRAPESTREAM_FAULT_REPORT")
    line = json.dumps(asdict(counts), default=str)
    sys.stdout.write(line + "\n")
    if target:
        with open(target, "a") as handle:
            handle.write(line + "\n")


class Stopwatch:
    def __init__(self) -> None:
        self.started = time.monotonic()

    def lap(self) -> float:
        return round(time.monotonic() - self.started, 2)
