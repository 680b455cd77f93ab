"""`scrapestream submit --from FILE`: submissions in batches, with progress, live counts and a summary.

At most `IN_FLIGHT` submissions wait for their decision at once, so the file is fed as fast as the
workers decide. Interrupted, it says how far it got; run again, what was submitted is reused.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn
from rich.progress import TimeRemainingColumn as Remaining
from rich.table import Table
from rich.text import Text

from projections.lifecycle.submission import submission_identity
from schemas.commands import SubmitJob
from schemas.enums import JobStatus
from schemas.events import JobAccepted, JobCompleted, JobRejected
from streams.cli.bulk_lines import FileSubmission, submissions_in
from streams.cli.exits import EXIT_FAILED, EXIT_TIMED_OUT
from streams.cli.render_flags import render_options_of
from streams.cli.terminal import printable
from streams.client import Client, Decided
from streams.errors import UsageError

BATCH = 500
IN_FLIGHT = 2_000
DECISION_TIMEOUT_S = 30.0
OPTION_FIELDS = {
    "job_type": "job_type",
    "transport": "transport_policy",
    "capture": "capture_mode",
    "policy_class": "policy_class",
    "cache_mode": "cache_mode",
    "retention": "retention_class",
    "callback_url": "callback_url",
}


class _Rate(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text(f"{task.speed:,.0f}/s" if task.speed else "", style="progress.data.speed")


@dataclass
class BulkRun:
    """What a run submitted and heard back, line by line."""

    lines: list[FileSubmission]
    commands: list[SubmitJob]
    wait: bool
    as_json: bool
    job_ids: list[UUID] = field(default_factory=list)
    published: int = 0
    decisions: dict[int, str] = field(default_factory=dict)  # index -> created | reused | rejected
    statuses: dict[int, str] = field(default_factory=dict)  # index -> terminal status
    completed: dict[UUID, str] = field(default_factory=dict)
    by_job: dict[UUID, list[int]] = field(default_factory=lambda: defaultdict(list))
    pending: dict[UUID, int] = field(default_factory=dict)  # decision command id -> index

    def __post_init__(self) -> None:
        for index, command in enumerate(self.commands):
            job_id = submission_identity(command)[0]
            self.job_ids.append(job_id)
            self.by_job[job_id].append(index)

    @property
    def done(self) -> bool:
        if self.published < len(self.lines) or self.pending:
            return False
        accepted = sum(1 for said in self.decisions.values() if said != "rejected")
        return not self.wait or len(self.statuses) == accepted

    def decided(self, decision: Decided) -> None:
        index = self.pending.pop(decision.command_id, None)
        if index is None:
            return
        said = {JobAccepted: "created", JobRejected: "rejected"}.get(type(decision), "reused")
        self.decisions[index] = said
        if isinstance(decision, JobRejected):
            self._print(index, reason=f"{decision.reason.value}: {decision.detail}")
        elif not self.wait:
            self._print(index)
        elif self.job_ids[index] in self.completed:
            self._finish(index, self.completed[self.job_ids[index]])

    def finished(self, completion: JobCompleted) -> None:
        if not self.wait or completion.job_id not in self.by_job or completion.status is JobStatus.REJECTED:
            return
        status = completion.status.value
        self.completed.setdefault(completion.job_id, status)
        for index in self.by_job[completion.job_id]:
            if self.decisions.get(index) in ("created", "reused") and index not in self.statuses:
                self._finish(index, status)

    def _finish(self, index: int, status: str) -> None:
        self.statuses[index] = status
        self._print(index, status=status)

    def _print(self, index: int, **more: str) -> None:
        line = self.lines[index]
        if not self.as_json and "reason" in more:
            rejected = f"line {line.line}: {line.url} rejected {more['reason']}"
            sys.stderr.write(printable(rejected) + "\n")
        if self.as_json:
            said = {"line": line.line, "url": line.url, "job_id": str(self.job_ids[index])}
            sys.stdout.write(json.dumps(said | {"submission": self.decisions[index]} | more) + "\n")


async def submit_file(arguments: argparse.Namespace, client: Client) -> int:
    parsed = list(submissions_in(_lines(arguments.source), _defaults(arguments)))
    err = Console(stderr=True)
    problems = [line for line in parsed if line.command is None]
    for line in problems:
        err.print(
            f"line {line.line}: {printable(str(line.problem))} (not submitted)", highlight=False, markup=False
        )
    lines = [line for line in parsed if line.command is not None]
    commands = [line.command for line in lines if line.command is not None]
    run = BulkRun(lines, commands, arguments.wait, arguments.json)
    with _progress(err) as progress:
        try:
            async with client.outcomes(arguments.wait) as outcomes:
                await _drive(run, client, outcomes, progress, arguments.timeout_s)
        except asyncio.CancelledError:
            progress.stop()
            err.print(_interrupted(run, arguments.source), highlight=False, soft_wrap=True)
            raise
        except TimeoutError as exc:
            progress.stop()
            err.print(f"{exc} (exit 3)", highlight=False)
            _summary(run, len(problems), arguments.json)
            return EXIT_TIMED_OUT
    _summary(run, len(problems), arguments.json)
    failed = problems or "rejected" in run.decisions.values()
    failed = failed or any(status != JobStatus.SUCCEEDED.value for status in run.statuses.values())
    return EXIT_FAILED if failed else 0


async def _drive(
    run: BulkRun,
    client: Client,
    outcomes: AsyncIterator[Decided | JobCompleted],
    progress: Progress,
    wait_s: float,
) -> None:
    queue: asyncio.Queue[Decided | JobCompleted] = asyncio.Queue()

    async def pump() -> None:
        async for outcome in outcomes:
            queue.put_nowait(outcome)

    decided = progress.add_task("submitted", total=len(run.lines))
    finishing = progress.add_task("finished", total=0, visible=run.wait)
    reading = asyncio.create_task(pump())
    deadline = time.monotonic() + wait_s
    try:
        while not run.done:
            await _feed(run, client)
            waited_for = "a decision" if run.pending else "the jobs to finish"
            limit = DECISION_TIMEOUT_S if run.pending else deadline - time.monotonic()
            try:
                async with asyncio.timeout(max(limit, 0.001)):  # wait_for can swallow a Ctrl-C (Python 3.11)
                    outcome = await queue.get()
            except TimeoutError:
                raise TimeoutError(f"waited too long for {waited_for}: is a worker running?") from None
            if isinstance(outcome, JobCompleted):
                run.finished(outcome)
            else:
                run.decided(outcome)
            progress.update(decided, completed=len(run.decisions))
            counts = Counter(run.statuses.values())
            shown = " · ".join(f"{status.lower()} {count:,}" for status, count in sorted(counts.items()))
            accepted = sum(1 for said in run.decisions.values() if said != "rejected")
            progress.update(finishing, completed=len(run.statuses), total=accepted, description=shown)
    finally:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading


async def _feed(run: BulkRun, client: Client) -> None:
    """Publish the next batches while fewer than `IN_FLIGHT` wait for their decision."""
    while run.published < len(run.lines) and len(run.pending) < IN_FLIGHT:
        batch = run.commands[run.published : run.published + BATCH]
        for offset, (_, decided_as) in enumerate(await client.submit_all(batch)):
            run.pending[decided_as] = run.published + offset
        run.published += len(batch)


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _Rate(),
        Remaining(),
        console=console,
        transient=False,
    )


def _interrupted(run: BulkRun, source: str) -> str:
    again = "scrapestream submit --from " + (source if source != "-" else "FILE")
    return (
        f"interrupted: {run.published:,} of {len(run.lines):,} submitted ({len(run.decisions):,} decided). "
        f"Run `{again}` again to submit the rest: what was submitted already is reused, not created twice."
    )


def _summary(run: BulkRun, invalid: int, as_json: bool) -> None:
    counts = Counter(run.decisions.values())
    rows = [(said, counts.get(said, 0)) for said in ("created", "reused", "rejected")]
    rows += [("invalid line", invalid)] if invalid else []
    rows += [(status, count) for status, count in sorted(Counter(run.statuses.values()).items())]
    if as_json:
        sys.stderr.write(json.dumps({"summary": dict(rows)}) + "\n")
        return
    table = Table(title=f"{len(run.lines) + invalid:,} lines")
    table.add_column("outcome")
    table.add_column("jobs", justify="right")
    for name, count in rows:
        table.add_row(name, f"{count:,}")
    Console().print(table)


def _lines(source: str) -> Sequence[str]:
    if source == "-":
        return sys.stdin.readlines()
    try:
        with Path(source).open(encoding="utf-8") as text:
            return text.readlines()
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror}") from exc


def _defaults(arguments: argparse.Namespace) -> dict[str, Any]:
    """The submit fields the command line sets, for lines that do not set them."""
    given = {name: getattr(arguments, option) for option, name in OPTION_FIELDS.items()}
    render = render_options_of(arguments)
    return {
        "caller_identity": arguments.caller,
        "deadline_s": arguments.deadline_s,
        **{name: value for name, value in given.items() if value is not None},
        **({"render": msgspec.structs.asdict(render)} if render is not None else {}),
    }
