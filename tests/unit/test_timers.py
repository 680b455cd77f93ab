"""Timers read the due index of owned partitions only; decide judges what is really due."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import msgspec

from projections.jobstore import JobStore
from projections.storage.memory import MemoryStore
from schemas.codec import decode
from schemas.commands import CreateMonitor
from schemas.enums import AttemptOutcome
from schemas.records import MonitorSchedule, MonitorSpec, Request
from streams.agents.timers import Timers
from streams.runtime.publisher import Outgoing
from streams.settings import load_settings
from tests.lifecycle import POLICY, T0, Lifecycle, attempt_under, failure, report, submit


class RecordingSink:
    """Keeps what would have been sent; no broker involved."""

    def __init__(self) -> None:
        self.sent: list[Outgoing] = []
        self.calls = 0

    async def send_all(self, messages: Sequence[Outgoing], batch: object = None) -> list[Any]:
        self.calls += 1
        self.sent += messages
        return []


async def timers_for(events, now, owned=(0,)):
    store = JobStore(MemoryStore(), POLICY)
    store.commit(0, events, next_offset=len(events))
    publisher = RecordingSink()
    timers = Timers(load_settings(), store, lambda: list(owned), publisher, POLICY, lambda: now)
    return timers, publisher


async def test_a_lapsed_lease_is_sent_to_the_lifecycle_once():
    lifecycle = Lifecycle()
    lifecycle(submit())
    timers, publisher = await timers_for(lifecycle.events, lifecycle.job.lease.lease_expires_at)
    assert await timers.tick() == 1
    assert await timers.tick() == 0
    (message,) = publisher.sent
    assert decode(message.value).job_id == lifecycle.job.job_id


async def test_nothing_is_sent_before_it_is_due_and_an_idle_pass_asks_nothing_of_the_publisher():
    lifecycle = Lifecycle()
    lifecycle(submit())
    timers, publisher = await timers_for(lifecycle.events, T0 + timedelta(seconds=1))
    assert await timers.tick() == 0
    assert publisher.calls == 0


async def test_partitions_this_worker_does_not_own_are_left_alone():
    lifecycle = Lifecycle()
    lifecycle(submit())
    timers, _ = await timers_for(lifecycle.events, T0 + timedelta(days=1), owned=(1,))
    assert await timers.tick() == 0


async def test_a_lease_beyond_the_horizon_is_sent_to_the_lifecycle():
    lifecycle = Lifecycle()
    lifecycle(submit())
    (accepted,) = lifecycle.events
    corrupt = msgspec.structs.replace(accepted, first_lease_expires_at=T0 + timedelta(days=30))
    timers, publisher = await timers_for([corrupt], T0)
    assert await timers.tick() == 1
    assert decode(publisher.sent[0].value).job_id == lifecycle.job.job_id


async def test_the_horizon_sweep_leaves_a_long_retry_wait_alone():
    lifecycle = Lifecycle()
    lifecycle(submit(deadline_at=T0 + timedelta(days=2)))
    retry_at = T0 + timedelta(hours=20)
    failed = attempt_under(
        lifecycle.job, AttemptOutcome.HTTP_ERROR, failure=failure("HTTP_503", retry_at=retry_at)
    )
    lifecycle(report(lifecycle.job, failed))
    assert lifecycle.job.next_attempt_at == retry_at
    timers, publisher = await timers_for(lifecycle.events, T0)
    assert await timers.tick() == 0
    assert publisher.sent == []


async def test_one_pass_sends_at_most_its_cap_the_oldest_first():
    events, expiries = [], {}
    for n in range(5):
        lifecycle = Lifecycle()
        lifecycle(submit(request=Request(url=f"https://example.com/{n}")), T0 + timedelta(seconds=n))
        events += lifecycle.events
        expiries[lifecycle.job.job_id] = lifecycle.job.lease.lease_expires_at
    store = JobStore(MemoryStore(), POLICY)
    store.commit(0, events, next_offset=len(events))
    publisher = RecordingSink()
    late = max(expiries.values())
    timers = Timers(load_settings(timers_per_pass=2), store, lambda: [0], publisher, POLICY, lambda: late)
    assert await timers.tick() == 2
    oldest = sorted(expiries, key=expiries.__getitem__)[:2]
    assert [decode(message.value).job_id for message in publisher.sent] == oldest


async def test_a_monitors_next_check_is_a_timer_and_a_check_in_progress_is_none():
    lifecycle = Lifecycle()
    created, _ = lifecycle(
        CreateMonitor(
            caller_identity="svc-a",
            name="pricing",
            spec=MonitorSpec(
                request=Request(url="https://example.com/"), schedule=MonitorSchedule(every_s=60)
            ),
        )
    )
    timers, publisher = await timers_for(lifecycle.events, T0)
    assert await timers.tick() == 1
    (message,) = publisher.sent
    assert decode(message.value).job_id == created.job_id
    lifecycle(decode(message.value), T0)  # the check is scheduled: no timer until it is recorded
    timers, _ = await timers_for(lifecycle.events, T0 + timedelta(hours=1))
    assert await timers.tick() == 0


async def test_the_index_names_when_the_earliest_timer_of_a_partition_falls_due():
    lifecycle = Lifecycle()
    lifecycle(submit())
    timers, _ = await timers_for(lifecycle.events, T0)
    expires_ms = int(lifecycle.job.lease.lease_expires_at.timestamp() * 1000)
    assert timers._store.next_due(0) == expires_ms
    assert timers._store.next_due(1) is None


async def test_an_idle_pass_waits_for_a_decision_and_a_timer_due_now_does_not(monkeypatch):
    monkeypatch.setattr("streams.agents.timers.IDLE_PASS_S", 60.0)
    lifecycle = Lifecycle()
    lifecycle(submit())
    timers, _ = await timers_for(lifecycle.events, T0)
    waiting = asyncio.create_task(timers._until_due(0.1))
    await asyncio.sleep(0.3)
    assert not waiting.done()  # the lease lapses later than the next pass
    timers.wake()
    await asyncio.wait_for(waiting, 30)
    due, _ = await timers_for(lifecycle.events, lifecycle.job.lease.lease_expires_at)
    await asyncio.wait_for(due._until_due(0.1), 30)
