"""`scrapestream replay --verify`: a rebuild from the events topic equals the live store, or the first
difference is named; a job with two terminal events, or (with `exactly_once`) two completions, is
named too."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from projections.storage.rocks import RocksStore
from schemas.enums import JobStatus
from schemas.events import JobSucceeded
from streams.runtime.publisher import Publisher, outgoing
from tests.brokers import profile
from tests.e2e.conftest import running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")
SCRAPESTREAM = str(Path(sys.executable).with_name("scrapestream"))


async def replay(settings, *arguments: str) -> tuple[int, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPESTREAM_")} | {
        "SCRAPESTREAM_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "SCRAPESTREAM_BROKER_PROFILE": settings.broker_profile,
        "SCRAPESTREAM_DATA_DIR": str(settings.data_dir),
        "SCRAPESTREAM_PARTITIONS": str(settings.partitions),
        "SCRAPESTREAM_TOPIC_PREFIX": settings.topic_prefix,
        "SCRAPESTREAM_PROFILES": json.dumps({k: list(v) for k, v in settings.profiles.items()}),
        "SCRAPESTREAM_CALLBACK_MAX_ELAPSED_S": str(settings.callback_max_elapsed_s),
        "SCRAPESTREAM_CALLBACK_RETRY_BASE_S": str(settings.callback_retry_base_s),
    }
    process = await asyncio.create_subprocess_exec(
        SCRAPESTREAM, "replay", *arguments, env=environment, stdout=asyncio.subprocess.PIPE
    )
    output, _ = await process.communicate()
    return process.returncode or 0, output.decode()


async def test_replay_verify_finds_the_live_store_equal_to_the_log_then_names_a_tampered_key(
    broker, tmp_path, origin
):
    settings = worker_settings(broker.bootstrap, tmp_path / "worker")
    async with running_system(settings) as system:
        jobs = [await system.submit(origin.url(f"/page/replayed-{n}")) for n in range(5)]
        jobs.append(await system.submit(origin.url("/flaky/replayed")))
        for job_id in jobs:
            assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED
        code, output = await replay(settings, "--verify")
        assert (code, "matches" in output) == (0, True), output
    store = RocksStore(settings.data_dir / "lifecycle")
    tampered = next(key for key, _ in store.scan(b"e/", b"e/\xff"))
    store.write({tampered: b"\xc3\x01tampered"})
    store.close()
    code, output = await replay(settings, "--verify")
    assert code == 1
    assert tampered.decode() in output
    code, output = await replay(settings, "--into", str(tmp_path / "copy"))
    assert code == 0
    assert (tmp_path / "copy").is_dir()


async def test_replay_verify_names_a_second_terminal_event_and_with_exactly_once_a_second_completion(
    broker, tmp_path, origin
):
    settings = worker_settings(broker.bootstrap, tmp_path / "worker")
    async with running_system(settings) as system:
        job_id = await system.submit(origin.url("/page/finished-once"))
        completion = await system.completion(job_id)
        await system.events.wait_for(lambda _: "JobSucceeded" in system.event_kinds(job_id))
        raw, terminal = next(
            (raw, event)
            for raw, event in zip(system.events.raw, system.events.records, strict=True)
            if isinstance(event, JobSucceeded) and event.job_id == job_id
        )
        code, output = await replay(settings, "--verify")
        assert code == 0, output
        assert "none with more than one terminal event" in output
        publisher = Publisher(settings.kafka_access, profile(settings.kafka_bootstrap))
        await publisher.start()
        try:  # what a second publish of the batch would have left, had nothing fenced it
            await publisher.send_all([outgoing(settings.topic("completions"), job_id, completion)])
            code, output = await replay(settings, "--verify")
            if settings.exactly_once:
                assert code == 1
                assert f"1 jobs have more than one completion: {job_id} (2)" in output
            else:
                assert (code, "1 jobs with repeated completions, as at_least_once allows" in output) == (
                    0,
                    True,
                )
            await publisher.send_all(
                [outgoing(settings.topic("events"), job_id, terminal, partition=raw.partition)]
            )
        finally:
            await publisher.stop()
    code, output = await replay(settings, "--verify")
    assert code == 1
    assert f"1 jobs have more than one terminal event: {job_id} (2)" in output
