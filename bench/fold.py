"""Fold and replay rates of the lifecycle: decide + evolve + RocksDB, and catch-up from the events topic.

    .venv/bin/python -m bench.fold --jobs 20000

`fold`: every job is submitted, then reported fetched, through `decide` in batches of 500, each
batch's events folded into a RocksDB `JobStore` in one commit (what the lifecycle agent does,
without Kafka). `replay`: the events are appended to a fresh events topic on the embedded broker,
then folded from it into an empty store (what a worker does when it takes a partition over).
Prints one JSON line: events and jobs per second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID, uuid4

from aiokafka import TopicPartition

from projections.jobstore import JobStore
from projections.lifecycle.decide import decide
from projections.lifecycle.evolve import replay
from projections.lifecycle.policy import ExecutionProfile, Policy
from projections.lifecycle.state import Job, State
from projections.storage.rocks import RocksStore
from schemas.codec import encode
from schemas.commands import Command, ReportAttempt, SubmitJob
from schemas.enums import ArtifactTrust, AttemptOutcome, TransportRoute
from schemas.events import Event
from schemas.records import Attempt, Request
from streams.agents.consequence_records import target_job
from streams.broker.compat import EMBEDDED_TANSU
from streams.broker.embedded import EmbeddedBroker
from streams.cli.serve import collect_rarely
from streams.readers.events_log import fold_log
from streams.runtime.publisher import Publisher, outgoing
from streams.runtime.topics import ensure_topics
from streams.settings import Settings, load_settings

BATCH = 500
NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
POLICY = Policy.from_declared({"http.fetch": (30_000, 3)}, ExecutionProfile(30_000, 3))


def submissions(jobs: int) -> list[SubmitJob]:
    deadline = NOW + timedelta(hours=1)
    return [
        SubmitJob(
            command_id=uuid4(),
            caller_identity="bench",
            request=Request(url=f"https://example.com/page/{n}"),
            deadline_at=deadline,
        )
        for n in range(jobs)
    ]


def report_for(state: State) -> ReportAttempt:
    lease = getattr(state, "lease", None)
    assert isinstance(state, Job)
    assert lease is not None
    attempt = Attempt(
        attempt_number=lease.attempt_number,
        lease_id=lease.lease_id,
        route=TransportRoute.DIRECT,
        outcome=AttemptOutcome.FETCHED,
        trust=ArtifactTrust.VERIFIED,
        http_status=200,
        bytes=2048,
        finished_at=NOW,
    )
    return ReportAttempt(command_id=uuid4(), job_id=state.job_id, attempt=attempt)


def fold(store: JobStore, commands: list[Command]) -> list[Event]:
    """Decide a batch of commands on the store's states and commit their events, as the agent does."""
    events: list[Event] = []
    states: dict[UUID, State] = {}
    for command in commands:
        job_id = target_job(command)
        state = states[job_id] if job_id in states else store.load(job_id)
        decided = decide(state, command, NOW, POLICY)
        states[job_id] = replay(decided, state)
        events += decided
    # Encoded once, as for the append to the events topic, and stored as those bytes.
    store.commit(0, events, None, encoded=[encode(event) for event in events], folded_by_caller=states)
    return events


def run_fold(jobs: int, directory: Path) -> tuple[float, list[Event]]:
    store = JobStore(RocksStore(directory), POLICY)
    pending = submissions(jobs)
    log: list[Event] = []
    started = time.perf_counter()
    for offset in range(0, jobs, BATCH):
        batch = pending[offset : offset + BATCH]
        log += fold(store, list(batch))
        reports: list[Command] = [report_for(store.load(target_job(command))) for command in batch]
        log += fold(store, reports)
    elapsed = time.perf_counter() - started
    store.close()
    return len(log) / elapsed, log


async def one_partition(bootstrap: str, name: str) -> Settings:
    """Settings for one-partition topics on the embedded broker, with the topics made."""
    settings = load_settings(
        kafka_bootstrap=bootstrap,
        broker_profile="embedded",
        partitions=1,
        topic_prefix=name,
        create_topics=True,
    )
    await ensure_topics(settings)
    return settings


async def append_log(publisher: Publisher, settings: Settings, log: list[Event]) -> None:
    """Appends `log` to events partition 0, as the lifecycle agent would have."""
    topic = settings.topic("events")
    for offset in range(0, len(log), 5_000):
        chunk = log[offset : offset + 5_000]
        await publisher.send_all([outgoing(topic, e.job_id, e, partition=0) for e in chunk])


async def run_replay(log: list[Event], directory: Path) -> float:
    async with EmbeddedBroker() as broker:
        settings = await one_partition(broker.bootstrap, "replay")
        publisher = Publisher(broker.access, EMBEDDED_TANSU)
        await publisher.start()
        await append_log(publisher, settings, log)
        await publisher.stop()
        topic = settings.topic("events")
        store = JobStore(RocksStore(directory), POLICY)
        started = time.perf_counter()
        folded = await fold_log(settings, TopicPartition(topic, 0), 0, len(log), store)
        elapsed = time.perf_counter() - started
        store.close()
    return folded / elapsed


def main(jobs: int) -> dict[str, object]:
    collect_rarely()  # as `scrapestream worker` runs
    with tempfile.TemporaryDirectory() as folding, tempfile.TemporaryDirectory() as replaying:
        fold_rate, log = run_fold(jobs, Path(folding))
        replay_rate = asyncio.run(run_replay(log, Path(replaying)))
    per_job = len(log) / jobs  # jobs' histories compare across releases that write fewer, fuller events
    return {
        "jobs": jobs,
        "events": len(log),
        "fold_events_per_s": round(fold_rate),
        "replay_events_per_s": round(replay_rate),
        "fold_jobs_per_s": round(fold_rate / per_job),
        "replay_jobs_per_s": round(replay_rate / per_job),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    arguments = parser.parse_args()
    sys.stdout.write(json.dumps(main(arguments.jobs)) + "\n")
