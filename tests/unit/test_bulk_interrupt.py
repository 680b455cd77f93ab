"""A bulk submission stops on Ctrl-C even when an outcome arrives in the same instant."""

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest
from rich.console import Console
from rich.progress import Progress

from schemas.commands import SubmitJob
from schemas.events import SubmissionReused
from streams.cli import bulk
from streams.cli.bulk import BulkRun, _drive
from streams.cli.bulk_lines import FileSubmission
from streams.cli.kafka import submission_of
from streams.cli.main import _parser


class _Client:
    async def submit_all(self, commands: Sequence[SubmitJob]) -> list[tuple[UUID, UUID]]:
        return [(uuid4(), uuid4()) for _ in commands]


async def test_ctrl_c_as_an_outcome_arrives_stops_the_run_instead_of_waiting_for_the_next(monkeypatch):
    monkeypatch.setattr(bulk, "DECISION_TIMEOUT_S", 0.5)  # a swallowed Ctrl-C would end in a TimeoutError
    command = submission_of(_parser().parse_args(["submit", "https://example.com/"]))
    run = BulkRun([FileSubmission(1, "https://example.com/", command)], [command], wait=False, as_json=True)
    stranger = SubmissionReused(
        event_id=uuid4(),
        job_id=uuid4(),
        sequence=2,
        occurred_at=datetime.now(UTC),
        command_id=uuid4(),
        caller_identity="someone",
    )
    driving: asyncio.Task[None]

    async def outcomes() -> AsyncIterator[SubmissionReused]:
        assert run.pending  # published before the run first waits for an outcome
        asyncio.get_running_loop().call_soon(driving.cancel)  # runs before the run reads what follows
        yield stranger
        await asyncio.Event().wait()

    with Progress(console=Console(quiet=True)) as progress:
        driving = asyncio.create_task(_drive(run, _Client(), outcomes(), progress, 30.0))  # type: ignore[arg-type]
        with pytest.raises(asyncio.CancelledError):
            await driving
