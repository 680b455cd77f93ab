"""What the fault scenarios share: observers that outlive a worker, polling, and scenarios run on
more than one cluster (the session's broker, and the three-broker Kafka cluster)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from uuid import uuid4

from streams.runtime.publisher import partition_of
from tests.e2e.conftest import observed_system
from tests.faults.harness import (
    TERMINAL,
    FaultCounts,
    Stopwatch,
    WorkerProcess,
    assert_stores_match_the_log,
    check_log,
    settings_of,
    worker_environment,
    workers,
)
from tests.faults.origins import hostile_origin

OBSERVING: list[Any] = []


def prefix() -> str:
    return f"f{uuid4().hex[:8]}"


async def until(condition, timeout_s: float = 60, every_s: float = 0.02) -> None:  # type: ignore[no-untyped-def]
    """Polls `condition` (state of another process or of observers) until it holds."""

    async def poll() -> None:
        while not condition():  # noqa: ASYNC110 - the state lives in other processes and tasks
            await asyncio.sleep(every_s)

    await asyncio.wait_for(poll(), timeout_s)


async def observe(settings):  # type: ignore[no-untyped-def]
    """Observers of the scenario's topics, started after its workers created them; stopped after
    the test (`conftest.stop_observers`)."""
    context = observed_system(settings)
    system = await context.__aenter__()
    OBSERVING.append(context)
    return system


def distinct_completions(system) -> int:  # type: ignore[no-untyped-def]
    return len({c.job_id for c in system.completions.records})


async def all_terminal(system, job_ids, timeout_s: float = 120) -> None:  # type: ignore[no-untyped-def]
    """Until every job has a completion and a terminal event (checked a few times a second: a
    check reads every record observed so far)."""
    wanted = set(job_ids)

    def ended() -> bool:
        completed = {completion.job_id for completion in system.completions.records}
        terminal = {event.job_id for event in system.events.records if isinstance(event, TERMINAL)}
        return wanted <= completed and wanted <= terminal

    await until(ended, timeout_s, every_s=0.25)


async def two_workers_one_killed(
    bootstrap: str, tmp_path: Path, scenario: str, **settings: Any
) -> FaultCounts:
    """Two workers share four partitions; one is SIGKILLed mid-fetch and the survivor finishes every
    job of every partition."""
    name = prefix()
    environments = [
        worker_environment(bootstrap, name, tmp_path / side, partitions=4, **settings) for side in ("a", "b")
    ]
    survivor, victim = WorkerProcess(environments[0], "a"), WorkerProcess(environments[1], "b")
    observed = settings_of(environments[0])
    async with hostile_origin() as origin, workers(survivor, victim):
        await survivor.start()
        await victim.start()
        system = await observe(observed)
        jobs = {f"pair-{n}": await system.submit(origin.url("sleep", f"pair-{n}")) for n in range(40)}
        await until(lambda: distinct_completions(system) >= 8)
        await until(lambda: origin.in_flight > 0)
        orphaned = {
            job for job in jobs.values() if partition_of(str(job).encode(), 4) in await victim.owned()
        }
        victim.kill()
        await victim.wait_dead()
        killed_at = Stopwatch()
        waiting = orphaned - {c.job_id for c in system.completions.records}
        # Recovered once the survivor completes a job of a partition the killed worker owned.
        await until(lambda: not waiting or waiting & {c.job_id for c in system.completions.records}, 120)
        recovery = killed_at.lap()
        await all_terminal(system, jobs.values())
        # The killed worker may have finished its own jobs first; its partitions move once its session lapses.
        owned = await survivor.owned()
        for _ in range(600):
            if owned == [0, 1, 2, 3]:
                break
            await asyncio.sleep(0.2)
            owned = await survivor.owned()
        await survivor.stop()
        requests = {jobs[key]: count for key, count in origin.requests.items() if key in jobs}
        counts = check_log(
            scenario,
            jobs.values(),
            system.events.records,
            system.completions.records,
            requests,
            5,
            crash_window=1,
        )
    assert owned == [0, 1, 2, 3]
    await assert_stores_match_the_log(environments, system.events)
    counts.recovery_s = [recovery]
    counts.notes = {"workers": 2, "survivor_owns": owned, "jobs_of_the_killed_worker": len(orphaned)}
    return counts
