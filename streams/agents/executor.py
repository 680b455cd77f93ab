"""The executor: runs due work under its lease and reports the attempt: `http.fetch` itself,
`browser.render` (and fetches over the `BROWSER` transport) through the worker's browser, other
job types through their plugin's `run` (`streams.jobtypes`), within the type's runtime. It reads
the due topics of the types it runs.

Per batch of due work:
1. refuse work of a type this executor does not run (a zero-cost `UNSUPPORTED_JOB_TYPE` report),
   and leave work whose start window passed (the lifecycle re-dispatches it, uncharged);
2. run each attempt in its own task (`pipeline.AttemptPipeline`) and report it; the batch counts as
   processed at once, so a rebalance never hands started work to a second executor.
An attempt answered from the cache makes no request. Otherwise it waits for its host's turn
(`Politeness`: per-host concurrency and request rate), then for one of the worker's
`SCRAPESTREAM_EXECUTOR_CONCURRENCY` fetch places; work whose start window passed meanwhile is
left for the lifecycle to dispatch again. A job whose policy class obeys robots.txt is checked
against it first (a zero-cost `DENIED` attempt when refused). Then it takes a route
(`streams.fetch.routes`): a metered one is reserved first and reconciled after the call, and a
denial is a zero-cost `DENIED` attempt. The fetch or render runs under the policy class's
response limits and timeout, within the job type's runtime. An attempt still running after a
second tells the lifecycle it started (`Renewals`), so its lease runs from there and a crash from
then on is charged; when the job is cancelled, or the lifecycle answers a start or renewal as
stale, a `LeaseRevoked` follows the work on its due topic and the attempt is stopped without a
report. Whatever a fetch or its storage raises is
itself a recorded, budget-counted attempt. A stopping executor gives back the work it took in but
had not begun (a zero-cost `WORKER_STOPPED` report: the lifecycle dispatches it again at its first
backoff) and lets begun attempts finish within the shutdown grace.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast
from uuid import UUID

from opentelemetry.trace import SpanKind

from projections.lifecycle.identity import name_based
from projections.lifecycle.submission import BROWSER_RENDER, renders
from schemas.codec import decode_as
from schemas.commands import ReportAttempt
from schemas.records import Attempt
from schemas.types import uuid_text
from schemas.work import DueWork, LeaseRevoked
from streams.agents.attempt_spans import attempt_attributes, outcome_attributes
from streams.agents.attempts import attempt_of
from streams.agents.pipeline import AttemptPipeline, start_by
from streams.agents.renewals import Renewals
from streams.agents.response_cache import ResponseCache
from streams.agents.slots import Slots
from streams.artifacts.port import ArtifactStore
from streams.fetch.browser import BrowserRenderer
from streams.fetch.http import HttpFetcher, local_result
from streams.fetch.routes import Routes
from streams.jobtypes import JobType
from streams.readers.global_table import GlobalTable
from streams.runtime import trace_context
from streams.runtime.commit_order import OUTSIDE, Batch
from streams.runtime.consumer import QuietStage, Record
from streams.runtime.deadinput import DeadLetters
from streams.runtime.flusher import Flusher
from streams.runtime.handover import Handover
from streams.runtime.local_records import LocalRecord
from streams.runtime.metrics import Metrics
from streams.runtime.publisher import Sink, outgoing
from streams.runtime.trace_context import TraceContext
from streams.settings import Settings

log = logging.getLogger(__name__)
HTTP_FETCH = "http.fetch"
STARTED_REMEMBERED = 50_000
WAITING_PER_FETCH = 16  # work taken in beyond the fetch places, waiting for its host's turn or a fair place
STALE_PER_BATCH = 500  # due records past their start window one batch may skip besides its work
NOTHING_SWITCHED_OFF: Mapping[str, str] = {}
MIN_WAIT = timedelta(milliseconds=1)  # due work read sooner waited too little for a span
GIVE_BACK_WITHIN_S = 5.0


class HttpExecutor(QuietStage):
    name = "executor"
    commit_each_batch = True  # a started fetch must not be read again by the next owner

    def __init__(
        self,
        settings: Settings,
        fetcher: HttpFetcher,
        artifacts: ArtifactStore,
        publisher: Sink,
        dead_letters: DeadLetters,
        clock: Callable[[], datetime],
        metrics: Metrics | None = None,
        table: GlobalTable | None = None,
        job_types: Mapping[str, JobType] | None = None,
        browser: BrowserRenderer | None = None,
        routes: Routes | None = None,
        counters: Counter[str] | None = None,
    ) -> None:
        self._settings = settings
        self._browser = browser
        self._runnable = frozenset({HTTP_FETCH, *(job_types or {}), *([BROWSER_RENDER] if browser else [])})
        self._publisher = publisher
        self._flusher = Flusher(publisher)
        self.reports = Handover(self._flusher, "commands", counters)
        self._dead = dead_letters
        self._clock = clock
        self._commands = settings.topic("commands")
        self._slots = Slots(settings.executor_concurrency * WAITING_PER_FETCH)
        self.max_batch = max(settings.executor_concurrency, 1)
        self.topics = frozenset(settings.due_topic(runner) for runner in self._runnable)
        self.not_started = 0  # due work whose start window passed before it was read
        self.revocations = 0
        self._started: OrderedDict[UUID, None] = OrderedDict()
        self._running: dict[UUID, asyncio.Task[None]] = {}  # by lease
        self._closing = False
        self._renewals = Renewals(self._flusher, self._commands, clock)
        self.cache = ResponseCache(table, artifacts, publisher, settings.topic("cache"), clock)
        self.pipeline = AttemptPipeline(
            settings,
            fetcher,
            artifacts,
            self.cache,
            self._renewals,
            clock,
            (lambda: table.disabled) if table is not None else (lambda: NOTHING_SWITCHED_OFF),
            metrics,
            job_types,
            browser,
            routes,
        )

    def capacity(self) -> int:
        return self._slots.free()

    def takes_over(self, partition: int) -> bool:
        return True  # due work the lifecycle of this worker decided, for a due partition it holds

    async def settled(self) -> None:
        await self._slots.idle()

    async def wait_capacity(self) -> None:
        await self._slots.wait_free()

    def batch_size(self, queued: Sequence[Record]) -> int:
        """Work past its start window (by its record's time) takes no place, it is only skipped: a
        backlog of it is read in whole batches, not one batch (and transaction) per record."""
        free = min(max(self.capacity(), 1), self.max_batch)
        window = timedelta(milliseconds=self._settings.start_window_ms)
        stale_before_ms = (self._clock() - window).timestamp() * 1000
        taken = 0
        for record in itertools.islice(queued, self.max_batch + STALE_PER_BATCH):
            if record.timestamp is None or record.timestamp >= stale_before_ms:
                if free == 0:
                    break
                free -= 1
            taken += 1
        return taken

    async def handle(self, records: Sequence[Record], batch: Batch = OUTSIDE) -> None:
        now = self._clock()
        startable: list[DueWork] = []
        traces: dict[UUID, Queued] = {}
        usable, immediate = self._dead.sort_out(records, _work_of, "due work")
        not_started = self.not_started
        for record, work in usable:
            if isinstance(work, LeaseRevoked):
                startable = [due for due in startable if due.lease_id != work.lease_id]  # not started yet
                self._revoke(work)
            elif not isinstance(work, DueWork):
                continue
            elif not self._runs(work):
                report = self._report_of(work, _unsupported(work, now))
                immediate.append(outgoing(self._commands, work.job_id, report, at=now))
            elif now > start_by(work):
                self.not_started += 1
            elif work.lease_id not in self._started:  # due work published twice carries the same lease
                self._remember_started(work.lease_id)
                startable.append(work)
                traces[work.lease_id] = Queued.of(record)
        _log_not_started(self.not_started - not_started)
        if immediate:
            await self._publisher.send_all(immediate, batch)
        for work in startable:
            self._running[work.lease_id] = self._slots.start(self._attempt(work, traces[work.lease_id]))

    def _runs(self, work: DueWork) -> bool:
        rendered = renders(work.job_type, work.transport_policy)
        return work.job_type in self._runnable and (self._browser is not None or not rendered)

    def _revoke(self, revoked: LeaseRevoked) -> None:
        running = self._running.get(revoked.lease_id)
        if running is None:
            return
        running.cancel()
        self.revocations += 1
        log.info(
            "job %s attempt %d: stopped, its lease was revoked (%s)",
            revoked.job_id,
            revoked.attempt_number,
            revoked.reason,
        )

    def _remember_started(self, lease_id: UUID) -> None:
        self._started[lease_id] = None
        if len(self._started) > STARTED_REMEMBERED:
            self._started.popitem(last=False)

    def _report_of(self, work: DueWork, attempt: Attempt) -> ReportAttempt:
        return ReportAttempt(
            command_id=name_based(work.lease_id, "report"), job_id=work.job_id, attempt=attempt
        )

    async def _attempt(self, work: DueWork, queued: Queued) -> None:
        trace_context.working_on(work.job_id, queued.context)  # this task's log lines name both
        recorded = (
            trace_context.enabled() if queued.context is None else trace_context.sampled(queued.context)
        )
        attributes = attempt_attributes(work) if recorded else None
        span = trace_context.span("scrapestream attempt", queued.context, SpanKind.CLIENT, attributes)
        with span as opened:
            now = self._clock()
            if opened is not None and queued.since is not None and now - queued.since >= MIN_WAIT:
                waited = {"scrapestream.wait": "queued"}
                trace_context.waited("scrapestream wait queued", None, queued.since, now, waited)
            try:
                attempt = await self.pipeline.run(work)
            except asyncio.CancelledError:
                if self._closing and work.lease_id not in self.pipeline.begun:
                    await self._give_back(work, queued.context)
                raise
            finally:
                self._running.pop(work.lease_id, None)  # a revocation from here on finds nothing to stop
                self.pipeline.begun.discard(work.lease_id)
            if attempt is not None and opened is not None:
                trace_context.set_attributes(opened, outcome_attributes(attempt))
                if attempt.failure is not None:
                    trace_context.failed(opened, attempt.failure.code)
        if attempt is not None:
            await self._report(work, attempt, trace_context.context_of(opened, queued.context))

    async def _report(self, work: DueWork, attempt: Attempt, context: TraceContext | None) -> None:
        """Hand over or publish the report, waiting out broker failures; the fetch is never redone for it."""
        report = self._report_of(work, attempt)
        key = uuid_text(work.job_id).encode()
        what = f"the report of job {work.job_id}"
        headers = () if context is None else context.headers()
        await self.reports.deliver(self._commands, key, report, self._clock(), what, headers)

    async def _give_back(self, work: DueWork, context: TraceContext | None) -> None:
        """Report work this stopping worker never began as a zero-cost attempt, so the lifecycle
        dispatches it again after its backoff, not after its start window."""
        stopped = local_result("WORKER_STOPPED", "")
        await self._report(
            work, attempt_of(work.attempt_number, work.lease_id, stopped, self._clock()), context
        )

    async def close(self) -> None:
        """Give back the work not begun, let begun attempts finish within the shutdown grace; the rest
        are left to the reaper."""
        self._closing = True
        await asyncio.sleep(0)  # work given a slot just now takes its first step, so it can be given back
        waiting = [task for lease_id, task in self._running.items() if lease_id not in self.pipeline.begun]
        for task in waiting:
            task.cancel()
        if waiting:  # a broker that is away leaves the rest to their start window
            await asyncio.wait(waiting, timeout=GIVE_BACK_WITHIN_S)
            log.info("stopping: %d attempts not begun given back, to be dispatched again", len(waiting))
        await self._slots.close(self._settings.shutdown_grace_s)
        await self._renewals.close()
        await self.reports.close()


@dataclass(frozen=True)
class Queued:
    """Where due work's trace goes on, and since when it waited (its record's time)."""

    context: TraceContext | None
    since: datetime | None

    @staticmethod
    def of(record: Record) -> Queued:
        timed = record.timestamp is not None and trace_context.enabled()
        since = datetime.fromtimestamp(record.timestamp / 1000, UTC) if timed else None
        return Queued(trace_context.from_headers(record.headers) if record.headers else None, since)


def _work_of(record: Record) -> DueWork | LeaseRevoked:
    if isinstance(record, LocalRecord):  # handed over by this worker's lifecycle: decoded already
        return cast(DueWork, record.decoded)
    return cast(DueWork | LeaseRevoked, decode_as(record.value or b"", DueWork, LeaseRevoked))


def _log_not_started(count: int) -> None:
    if count:
        log.info("%d due records were past their start window in the queue: not started", count)


def _unsupported(work: DueWork, now: datetime) -> Attempt:
    refused = local_result("UNSUPPORTED_JOB_TYPE", f"job type {work.job_type!r} on this worker")
    return attempt_of(work.attempt_number, work.lease_id, refused, now)
