"""Fault scenarios against real worker processes, a real broker and real loopback origins.

Each scenario asserts the invariants of `harness.check_log` and reports its counts
(`SCRAPESTREAM_FAULT_REPORT=faults.jsonl pytest tests/faults`), recorded in docs/RELIABILITY.md.
"""

from __future__ import annotations

import json
from datetime import timedelta
from itertools import cycle

import pytest
from aiokafka import AIOKafkaProducer

from schemas.codec import encode
from schemas.commands import SubmitJob
from schemas.enums import JobStatus, PolicyClass
from schemas.records import Request
from streams.clock import utc_now
from tests.faults.harness import (
    Stopwatch,
    WorkerProcess,
    assert_stores_match_the_log,
    check_log,
    report,
    settings_of,
    worker_environment,
    workers,
)
from tests.faults.origins import hostile_origin
from tests.faults.scenarios import (
    all_terminal,
    distinct_completions,
    observe,
    prefix,
    two_workers_one_killed,
    until,
)
from tests.poison import poison_records

pytestmark = [pytest.mark.asyncio(loop_scope="function"), pytest.mark.timeout(300)]


# On Kafka each kill waits out the 45 s session timeout, and the ten-kill exactly_once loop covers its kills.
@pytest.mark.soak_on("kafka")
async def test_a_worker_killed_three_times_mid_fetch_loses_nothing_and_forks_nothing(broker, tmp_path):
    environment = worker_environment(broker.bootstrap, prefix(), tmp_path / "worker", processes="auto")
    settings = settings_of(environment)
    worker = WorkerProcess(environment)
    watch = Stopwatch()
    async with hostile_origin() as origin, workers(worker):
        await worker.start()
        system = await observe(settings)
        jobs: dict[str, str] = {}
        recovery = []
        for kill in range(3):
            # each kill gets its own batch: with several processes an earlier batch may already be done
            batch = [f"kill-{kill}-{n}" for n in range(15)]
            jobs |= {key: await system.submit(origin.url("sleep", key)) for key in batch}
            await until(lambda: origin.in_flight > 0)
            worker.kill()
            await worker.wait_dead()
            killed_at, done_before, submitted = Stopwatch(), distinct_completions(system), len(jobs)
            await worker.start()
            await until(
                lambda done=done_before, last=submitted: distinct_completions(system) > done or done == last,
                120,
            )
            recovery.append(killed_at.lap())
        await all_terminal(system, jobs.values())
        await worker.stop()
        requests = {jobs[key]: count for key, count in origin.requests.items() if key in jobs}
        counts = check_log(
            "sigkill-three-times",
            jobs.values(),
            system.events.records,
            system.completions.records,
            requests,
            5,
            crash_window=3,
        )
    await assert_stores_match_the_log([environment], system.events)
    assert {c.status for c in system.completions.records} == {JobStatus.SUCCEEDED}
    counts.recovery_s = recovery
    counts.notes = {"kills": 3, "elapsed_s": watch.lap(), "workers": 1}
    report(counts)


async def test_two_workers_one_killed_the_survivor_finishes_every_partition(broker, tmp_path):
    report(await two_workers_one_killed(broker.bootstrap, tmp_path, "two-workers-one-killed"))


async def test_ten_percent_poison_of_every_kind_interleaved_with_valid_submissions(broker, tmp_path):
    environment = worker_environment(broker.bootstrap, prefix(), tmp_path / "worker")
    settings = settings_of(environment)
    worker = WorkerProcess(environment)
    kinds = cycle(poison_records().items())
    async with hostile_origin() as origin, workers(worker):
        await worker.start()
        system = await observe(settings)
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, enable_idempotence=False)
        await producer.start()
        jobs, poison = {}, []
        try:
            for n in range(110):
                if n % 10 == 9:
                    _, value = next(kinds)
                    poison.append(value)
                else:
                    command = SubmitJob(
                        caller_identity="faults",
                        request=Request(url=origin.url("page", f"mixed-{n}")),
                        deadline_at=utc_now() + timedelta(minutes=5),
                    )
                    from projections.lifecycle.submission import submission_identity

                    jobs[f"mixed-{n}"] = submission_identity(command)[0]
                    value = encode(command)
                await producer.send(settings.topic("submit"), value, key=f"r{n}".encode())
            await producer.flush()
        finally:
            await producer.stop()
        await all_terminal(system, jobs.values())
        dead = await system.dead_input.wait_for(lambda records: len(records) >= len(poison))
        await worker.stop()
        requests = {jobs[key]: count for key, count in origin.requests.items() if key in jobs}
        counts = check_log(
            "poison-10-percent", jobs.values(), system.events.records, system.completions.records, requests, 5
        )
    assert sorted(record.value for record in dead) == sorted(poison)
    await assert_stores_match_the_log([environment], system.events)
    counts.dead_input = len(dead)
    counts.notes = {"records": 110, "poison": len(poison), "kinds": len(poison_records())}
    report(counts)


HOSTILE = {
    "drip": "TIMEOUT",
    "huge": "BODY_TOO_LARGE",
    "bomb": "BODY_TOO_LARGE",
    "loop": "TOO_MANY_REDIRECTS",
    "private": "ADDRESS_REFUSED",
    "malformed": "PROTOCOL_ERROR",
}


async def test_hostile_origins_end_in_typed_failures_within_the_attempt_budget(broker, tmp_path):
    environment = worker_environment(
        broker.bootstrap,
        prefix(),
        tmp_path / "worker",
        allow_private_networks="0",
        allowed_networks=json.dumps(["127.0.0.1/32"]),
        profiles=json.dumps({"http.fetch": [1_500, 3]}),
        policy_classes=json.dumps(
            {"STANDARD": {"max_body_bytes": 1_000_000, "max_decoded_bytes": 2_000_000}}
        ),
    )
    settings = settings_of(environment)
    worker = WorkerProcess(environment)
    async with hostile_origin() as origin, workers(worker):
        await worker.start()
        system = await observe(settings)
        jobs = {
            f"{behaviour}-{n}": (behaviour, await system.submit(origin.url(behaviour, f"{behaviour}-{n}")))
            for behaviour in [*HOSTILE, "page"]
            for n in range(2)
        }
        await all_terminal(system, [job_id for _, job_id in jobs.values()])
        await worker.stop()
        requests = {job_id: origin.requests[key] for key, (_, job_id) in jobs.items()}
        counts = check_log(
            "hostile-origins", requests, system.events.records, system.completions.records, requests, 3
        )
    for behaviour, job_id in jobs.values():
        (completion,) = system.completions.of_job(job_id)
        if behaviour == "page":
            assert completion.status is JobStatus.SUCCEEDED
        else:
            assert completion.failure.code == HOSTILE[behaviour], behaviour
    assert max(origin.hops.values()) <= settings.policy_classes[PolicyClass.STANDARD].max_redirects
    await assert_stores_match_the_log([environment], system.events)
    counts.notes = {"behaviours": sorted(HOSTILE), "redirect_hops_max": max(origin.hops.values())}
    report(counts)


async def test_a_receiver_down_beyond_the_window_is_abandoned_and_one_back_in_time_gets_it(broker, tmp_path):
    environment = worker_environment(
        broker.bootstrap, prefix(), tmp_path / "worker", callback_max_elapsed_s=3, callback_retry_base_s=0.3
    )
    settings = settings_of(environment)
    worker = WorkerProcess(environment)
    async with hostile_origin() as origin, workers(worker):
        await worker.start()
        system = await observe(settings)
        down = await system.submit(origin.url("page", "cb-a"), callback_url=origin.url("hook-down", "down"))
        late = await system.submit(origin.url("page", "cb-b"), callback_url=origin.url("hook-late", "late"))
        await system.events.wait_for(lambda _: "CallbackAbandoned" in system.event_kinds(down), 60)
        await system.events.wait_for(lambda _: "CallbackDelivered" in system.event_kinds(late), 60)
        await worker.stop()
        counts = check_log(
            "callback-receivers", [down, late], system.events.records, system.completions.records
        )
    assert origin.requests["late"] == 3
    assert origin.requests["down"] >= 2
    await assert_stores_match_the_log([environment], system.events)
    counts.notes = {
        "tries_to_down_receiver": origin.requests["down"],
        "tries_to_late_receiver": origin.requests["late"],
    }
    report(counts)
