"""Timers read the due index of owned partitions only; decide judges what is really due."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from projections.jobstore import JobStore
from projections.storage.memory import MemoryStore
from schemas.codec import decode
from schemas.events import JobDispatched
from streams.agents.ownership import Ownership
from streams.agents.timers import Timers
from streams.publisher import Outgoing
from streams.settings import load_settings
from tests.lifecycle import POLICY, T0, Lifecycle, submit


class RecordingSink:
    """Keeps what would have been sent; no broker involved."""

    def __init__(self) -> None:
        self.sent: list[Outgoing] = []

    async def send_all(self, messages: Sequence[Outgoing]) -> list[Any]:
        self.sent += messages
        return []

    async def send(self, message: Outgoing) -> Any:
        return (await self.send_all([message]))[0]


async def no_catch_up(partition: int) -> int:
    return 0


async def timers_for(events, now, owned=(0,)):
    store = JobStore(MemoryStore())
    store.commit(0, events, next_offset=len(events))
    ownership = Ownership(no_catch_up)
    ownership.assigned(owned)
    for partition in owned:
        await ownership.wait_ready(partition)
    publisher = RecordingSink()
    timers = Timers(load_settings(), store, ownership, publisher, POLICY, lambda: now)
    return timers, publisher


async def test_a_lapsed_lease_is_sent_to_the_lifecycle_once():
    lifecycle = Lifecycle()
    lifecycle(submit())
    timers, publisher = await timers_for(lifecycle.events, lifecycle.job.lease.lease_expires_at)
    assert await timers.tick() == 1
    assert await timers.tick() == 0
    (message,) = publisher.sent
    assert decode(message.value).job_id == lifecycle.job.job_id


async def test_nothing_is_sent_before_it_is_due():
    lifecycle = Lifecycle()
    lifecycle(submit())
    timers, _ = await timers_for(lifecycle.events, T0 + timedelta(seconds=1))
    assert await timers.tick() == 0


async def test_partitions_this_worker_does_not_own_are_left_alone():
    lifecycle = Lifecycle()
    lifecycle(submit())
    timers, _ = await timers_for(lifecycle.events, T0 + timedelta(days=1), owned=(1,))
    assert await timers.tick() == 0


async def test_a_lease_beyond_the_horizon_is_sent_to_the_lifecycle():
    lifecycle = Lifecycle()
    lifecycle(submit())
    dispatched = lifecycle.events[1]
    corrupt = replace_event(dispatched, T0 + timedelta(days=30))
    timers, publisher = await timers_for([lifecycle.events[0], corrupt], T0)
    assert await timers.tick() == 1
    assert decode(publisher.sent[0].value).job_id == lifecycle.job.job_id


def replace_event(event: JobDispatched, lease_expires_at) -> JobDispatched:
    return event.model_copy(update={"lease_expires_at": lease_expires_at})
