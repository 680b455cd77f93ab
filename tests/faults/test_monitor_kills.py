"""Monitors across worker kills: a worker SIGKILLed while checks are under way loses no due time
and makes no due time's check twice (on Apache Kafka with `exactly_once`: one completion per check
job; on the embedded broker at least once: a check's fetch may run again, it is recorded once)."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta
from typing import Any
from uuid import UUID

import httpx
import pytest

from projections.monitors.schedule import Schedule, next_due
from schemas.events import (
    ChangeDetected,
    CheckRecorded,
    CheckScheduled,
    JobAccepted,
    JobCompleted,
    MonitorCreated,
)
from tests.brokers import profile_name
from tests.faults.harness import (
    WorkerProcess,
    assert_stores_match_the_log,
    settings_of,
    worker_environment,
    workers,
)
from tests.faults.origins import hostile_origin
from tests.faults.scenarios import observe, prefix, until

pytestmark = [pytest.mark.asyncio(loop_scope="function"), pytest.mark.timeout(300)]
MONITORS = 12
INTERVAL_S = 10
KILLS = 2
SESSION_TIMEOUT_MS = 6_000


async def test_a_worker_killed_during_checks_loses_and_repeats_no_check(broker, tmp_path):
    guarantee = "exactly_once" if profile_name(broker.bootstrap) == "kafka" else "at_least_once"
    environment = worker_environment(
        broker.bootstrap,
        prefix(),
        tmp_path / "worker",
        processing_guarantee=guarantee,
        session_timeout_ms=SESSION_TIMEOUT_MS,  # the restarted worker waits this long for the dead one
    )
    settings = settings_of(environment)
    worker = WorkerProcess(environment)
    async with hostile_origin() as origin, workers(worker):
        await worker.start()
        system = await observe(settings)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
            for n in range(MONITORS):
                body = {
                    "name": f"kill-{n}",
                    "caller_identity": "svc-watch",
                    "url": origin.url("sleep", f"monitor-{n}"),
                    "every_s": INTERVAL_S,
                }
                answer = await _created(http, body)
                assert answer.status_code == 201, answer.text
        monitor_ids = {e.job_id for e in system.events.records if isinstance(e, MonitorCreated)}
        for _ in range(KILLS):
            await until(lambda: origin.in_flight > 0, 60, every_s=0.005)  # a check's fetch is under way
            worker.kill()
            await worker.wait_dead()
            await worker.start()
        checked = Counter[UUID]()

        def each_monitor_checked_after_the_kills(minimum: int) -> bool:
            checked.clear()
            checked.update(e.job_id for e in system.events.records if isinstance(e, CheckRecorded))
            return len(checked) == MONITORS and min(checked.values()) >= minimum

        await until(lambda: each_monitor_checked_after_the_kills(4), 150, every_s=0.25)
        await worker.stop()
    await assert_stores_match_the_log([environment], system.events)
    _no_due_time_lost_or_checked_twice(system.events.records, monitor_ids)
    _each_check_job_ends_once(system, guarantee)


async def _created(http: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
    """`POST /monitors`, again while the worker says its partitions are still being assigned."""
    for _ in range(300):
        answer = await http.post("/monitors", json=body)
        if answer.status_code != 503:
            return answer
        await asyncio.sleep(0.1)
    return answer


def _no_due_time_lost_or_checked_twice(events: list[Any], monitor_ids: set[UUID]) -> None:
    for monitor_id in monitor_ids:
        scheduled = [e for e in events if isinstance(e, CheckScheduled) and e.job_id == monitor_id]
        recorded = [e for e in events if isinstance(e, CheckRecorded) and e.job_id == monitor_id]
        due_times = [e.due_at for e in scheduled]
        assert len(set(due_times)) == len(due_times), f"a due time checked twice: {due_times}"
        assert len({e.check_job_id for e in scheduled}) == len(scheduled)
        assert len({e.check_job_id for e in recorded}) == len(recorded), "a check recorded twice"
        assert [e.check_job_id for e in recorded] == [e.check_job_id for e in scheduled][: len(recorded)]
        # After the baseline, due times are every interval: each is checked, or counted as missed.
        baseline, *later = scheduled
        first = next_due(Schedule(every_s=INTERVAL_S), monitor_id, baseline.due_at)
        assert first is not None
        span = (later[-1].due_at - first) // timedelta(seconds=INTERVAL_S) + 1
        assert sum(1 + e.missed for e in later) == span, [(e.due_at, e.missed) for e in scheduled]
        changes = [e for e in events if isinstance(e, ChangeDetected) and e.job_id == monitor_id]
        assert len(changes) == 1  # the baseline; the page never changes


def _each_check_job_ends_once(system: Any, guarantee: str) -> None:
    check_jobs = {e.check_job_id for e in system.events.records if isinstance(e, CheckScheduled)}
    accepted = Counter(e.job_id for e in system.events.records if isinstance(e, JobAccepted))
    assert all(accepted[job] <= 1 for job in check_jobs)
    completions = Counter(
        c.job_id for c in system.completions.records if isinstance(c, JobCompleted) and c.job_id in check_jobs
    )
    assert completions, "no check job completed"
    if guarantee == "exactly_once":
        assert max(completions.values()) == 1, "a check job completed twice"
