"""A downstream service added later reads completions from a point in time (`client.completions(since)`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from uuid import UUID

import pytest
import pytest_asyncio

from schemas.commands import SubmitJob
from schemas.records import Request
from streams.clock import utc_now
from streams.runtime.publisher import Outgoing, Publisher
from tests.e2e.conftest import Origin, System, running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(broker, tmp_path_factory) -> AsyncIterator[System]:
    async with running_system(worker_settings(broker.bootstrap, tmp_path_factory.mktemp("since"))) as running:
        yield running


async def first_jobs(system: System, count: int, **since: object) -> list[UUID]:
    found: list[UUID] = []
    async with asyncio.timeout(60), contextlib.aclosing(system.client.completions(**since)) as completions:
        async for completion in completions:
            found.append(completion.job_id)
            if len(found) == count:
                return found
    return found


async def test_completions_since_a_time_start_at_the_first_written_then(system, origin: Origin):
    earlier = await system.submit(origin.url("/page/since-earlier"))
    await system.completion(earlier)
    await asyncio.sleep(1.5)
    cut = utc_now()
    later = await system.submit(origin.url("/page/since-later"))
    await system.completion(later)
    assert await first_jobs(system, 1, since=cut) == [later]
    # Each partition is read in order; two jobs on two partitions come in either order.
    assert sorted(await first_jobs(system, 2, since=cut - timedelta(hours=1))) == sorted([earlier, later])
    waiting = asyncio.ensure_future(first_jobs(system, 1, since=utc_now() + timedelta(seconds=1)))
    await asyncio.sleep(2)
    newest = await system.submit(origin.url("/page/since-newest"))
    assert await waiting == [newest]  # nothing that late yet: it waits at the end for new ones


async def test_a_record_no_writer_makes_on_the_events_topic_does_not_end_the_outcomes_read(
    system, origin: Origin
):
    async with system.client.outcomes(False) as outcomes:
        publisher = Publisher(system.settings.kafka_access, system.settings.client_profile)
        await publisher.start()
        try:
            await publisher.send_all(
                [Outgoing(system.settings.topic("events"), b"junk", b"\xc3\x01not avro")]
            )
        finally:
            await publisher.stop()
        command = SubmitJob(
            caller_identity="svc-a",
            request=Request(url=origin.url("/page/after-junk")),
            deadline_at=utc_now() + timedelta(minutes=5),
        )
        ((job_id, decided_as),) = await system.client.submit_all([command])
        async with asyncio.timeout(60):
            async for outcome in outcomes:
                if getattr(outcome, "command_id", None) == decided_as:
                    break
    assert outcome.job_id == job_id
