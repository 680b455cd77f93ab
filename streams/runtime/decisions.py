"""What the HTTP API may ask of the lifecycle that decides its commands, and no more: which commands
partitions this worker keeps, when a command it publishes is decided, and when what a batch
published is in the local store. The lifecycle tells these objects; the API holds them, not the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import typing
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Protocol
from uuid import UUID

from schemas.commands import RecordAudit
from schemas.events import AuditRecorded, Event, JobAccepted, JobRejected, MonitorEvent, SubmissionReused

# What decided a command: a submission's first event, a mutation's audit record, or the refusal it
# sent to its actor's audit stream.
# A monitor's command is decided by its first event.
Decided = AuditRecorded | RecordAudit | JobAccepted | SubmissionReused | JobRejected | MonitorEvent
DECIDING = (AuditRecorded, JobAccepted, SubmissionReused, JobRejected, *typing.get_args(MonitorEvent))
WRITTEN_WAIT_S = 5.0  # how long a read waits for a batch in flight before it answers what is stored


class Ownership(Protocol):
    """The commands partitions this worker keeps, and those it is still catching up or cannot."""

    @property
    def owned(self) -> list[int]: ...

    @property
    def catching_up(self) -> list[int]: ...

    @property
    def blocked(self) -> Mapping[int, str]: ...

    @property
    def events_from_log(self) -> int: ...


class Decisions:
    """Commands awaited until decided, and jobs whose batch published before its events folded."""

    def __init__(self) -> None:
        self._waiting: dict[UUID, asyncio.Future[Decided]] = {}
        self._unfolded: Counter[UUID] = Counter()
        self._batch_folded = asyncio.Event()

    def decision(self, command_id: UUID, timeout_s: float) -> Awaitable[Decided | None]:
        """What decided a command this worker decides (None if not in time). Watches from the call on,
        so call it before publishing the command."""
        future = self._waiting.setdefault(command_id, asyncio.get_running_loop().create_future())

        async def decided() -> Decided | None:
            try:
                async with asyncio.timeout(timeout_s):
                    return await asyncio.shield(future)
            except TimeoutError:
                return None
            finally:
                self._waiting.pop(command_id, None)

        return decided()

    def answer(self, command_id: UUID, decided: Decided) -> None:
        waiting = self._waiting.get(command_id)
        if waiting is not None and not waiting.done():
            waiting.set_result(decided)

    def folded(self, events: Iterable[Event]) -> None:
        """The events of a batch are in the store: the commands they decide are answered."""
        for event in events:
            if isinstance(event, DECIDING):
                self.answer(event.command_id, event)

    def publishing(self, jobs: Counter[UUID]) -> Callable[[], None]:
        """A batch is about to publish consequences of `jobs`; call what this returns once it folded
        (or aborted)."""
        self._unfolded.update(jobs)

        def ended() -> None:
            self._unfolded.subtract(jobs)
            self._unfolded = +self._unfolded
            self._batch_folded.set()
            self._batch_folded = asyncio.Event()

        return ended

    def unfolded(self, job_id: UUID) -> bool:
        """Whether a batch has published consequences of `job_id` (its completion, say) but its
        events are not in the store yet."""
        return job_id in self._unfolded

    async def written(self, job_id: UUID | None = None) -> None:
        """Returns once the store holds every event of `job_id` whose consequences this worker has
        published (with None: once the batch in flight, if any, has folded): a reader who saw a
        completion finds its job done."""
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + WRITTEN_WAIT_S
        while self._pending(job_id) and loop.time() < give_up_at:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(give_up_at):
                    await self._batch_folded.wait()
            if job_id is None:
                return  # batches run one at a time: the one in flight when asked has ended

    def _pending(self, job_id: UUID | None) -> bool:
        return job_id in self._unfolded if job_id is not None else bool(self._unfolded)
