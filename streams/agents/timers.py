"""Timers: due retries, lapsed leases and callback tries become `CheckTimers`, per owned partition.

Reads the ordered due index; never scans every job. The horizon sweep looks only at running
leases (the only timers it can act on). `decide` judges what is really due.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from uuid import UUID, uuid5

from projections.jobstore import JobStore
from projections.lifecycle.policy import Policy
from schemas.commands import CheckTimers
from streams.runtime.periodic import one_round
from streams.runtime.publisher import Sink, outgoing
from streams.settings import Settings

log = logging.getLogger(__name__)
RESEND_AFTER_S = 5.0
HORIZON_SWEEP_EVERY_S = 10.0
IDLE_PASS_S = 1.0  # the longest an idle worker goes without a pass (a partition it just took over)


class Timers:
    def __init__(
        self,
        settings: Settings,
        store: JobStore,
        owned: Callable[[], list[int]],
        publisher: Sink,
        policy: Policy,
        clock: Callable[[], datetime],
    ) -> None:
        self._settings = settings
        self._store = store
        self._owned = owned
        self._publisher = publisher
        self._policy = policy
        self._clock = clock
        self._sent: dict[tuple[UUID, str], float] = {}
        self._last_sweep = 0.0
        self._turn = 0
        self._woken = asyncio.Event()

    def wake(self) -> None:
        """Something was decided: a timer may be due sooner than the pass waits for."""
        self._woken.set()

    async def run(self) -> None:
        interval_s = self._settings.timer_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            await self._until_due(interval_s)
            await one_round(self.tick, "timer pass")

    async def _until_due(self, interval_s: float) -> None:
        """Returns when a timer falls due within `interval_s`, a decision may have set one, or at the
        latest after `IDLE_PASS_S`: an idle worker does not scan its timers ten times a second."""
        self._woken.clear()
        now_ms = self._clock().timestamp() * 1000
        dues = [due for partition in self._owned() if (due := self._store.next_due(partition)) is not None]
        earliest = min(dues, default=None)
        if earliest is not None and earliest - now_ms <= interval_s * 1000:
            return
        wait_s = IDLE_PASS_S if earliest is None else min(IDLE_PASS_S, (earliest - now_ms) / 1000)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                await self._woken.wait()

    async def tick(self) -> int:
        """At most `timers_per_pass` due timers, the oldest of each partition first; partitions take
        turns being first, so a mass expiry on one delays no other's timers for long."""
        now = self._clock()
        due: list[tuple[UUID, str]] = []
        owned = self._owned()
        self._turn = (self._turn + 1) % max(len(owned), 1)
        for partition in owned[self._turn :] + owned[: self._turn]:
            left = self._settings.timers_per_pass - len(due)
            if left <= 0:
                break
            due += [(job_id, f"timer:{due_ms}") for due_ms, job_id in self._store.due(partition, now, left)]
        if time.monotonic() - self._last_sweep > HORIZON_SWEEP_EVERY_S:
            self._last_sweep = time.monotonic()
            horizon = now + timedelta(milliseconds=self._policy.lease_horizon_ms)
            for partition in self._owned():
                due += [
                    (job_id, f"horizon:{due_ms}")
                    for due_ms, job_id in self._store.leases_after(partition, horizon)
                ]
        return await self._send(due, now)

    async def _send(self, due: list[tuple[UUID, str]], now: datetime) -> int:
        sent_at = time.monotonic()
        self._sent = {key: at for key, at in self._sent.items() if sent_at - at < RESEND_AFTER_S}
        fresh = [(job_id, label) for job_id, label in due if (job_id, label) not in self._sent]
        if not fresh:
            return 0
        topic = self._settings.topic("commands")
        await self._publisher.send_all(
            [
                outgoing(topic, job_id, CheckTimers(command_id=uuid5(job_id, label), job_id=job_id), at=now)
                for job_id, label in fresh
            ]
        )
        for key in fresh:
            self._sent[key] = sent_at
        return len(fresh)
