"""The executor: runs due work under its lease and reports the attempt: `http.fetch` itself,
`browser.render` (and fetches over the `BROWSER` transport) through the worker's browser, other
job types through their plugin's `run` (`streams.jobtypes`), within the type's runtime. It reads
the due topics of the types it runs.

Per batch of due work:
1. refuse work of a type this executor does not run (a zero-cost `UNSUPPORTED_JOB_TYPE` report),
   and leave work whose start window passed (the lifecycle re-dispatches it, uncharged);
2. run each attempt in its own task and report it; the batch counts as processed at once, so a
   rebalance never hands started work to a second executor.
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
itself a recorded, budget-counted attempt.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from uuid import UUID

from projections.ledger import ZERO
from projections.lifecycle.cache import (
    ResponseCaps,
    answers,
    cache_key,
    cached_outcome,
    revalidation_headers,
)
from projections.lifecycle.identity import host_of, name_based, origin_of
from projections.lifecycle.limits import clip
from projections.lifecycle.outcomes import local_failure
from projections.lifecycle.policy import CredentialGrant
from projections.lifecycle.submission import BROWSER_RENDER, renders
from schemas.codec import decode_as
from schemas.commands import ReportAttempt
from schemas.enums import ArtifactTrust, AttemptOutcome, CaptureMode, FailureDisposition, TransportRoute
from schemas.errors import CodecError
from schemas.records import Artifact, Attempt, Cost, Failure, RenderOptions, Request
from schemas.types import build, build_with_defaults, to_utc_millis
from schemas.work import CacheEntry, DueWork, LeaseRevoked
from streams.agents.renewals import Renewals
from streams.agents.slots import Slots
from streams.artifacts.port import ArtifactStore
from streams.fetch.browser import BrowserRenderer
from streams.fetch.http import FetchLimits, FetchResult, HttpFetcher, call_deadline_s, local_result
from streams.fetch.politeness import HostGate, HostLimit, Politeness
from streams.fetch.robots import RobotsRules, Verdict
from streams.fetch.routes import Denial, Passage, Routes
from streams.jobtypes import JobType, Outcome, carrying
from streams.readers.global_table import GlobalTable
from streams.runtime.consumer import QuietStage, Record
from streams.runtime.deadinput import DeadLetters
from streams.runtime.flusher import Flusher
from streams.runtime.metrics import Metrics
from streams.runtime.publisher import Outgoing, Sink, outgoing, tombstone
from streams.settings import ResponseLimits, Settings

log = logging.getLogger(__name__)
FAILURE_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
HTTP_FETCH = "http.fetch"
STARTED_REMEMBERED = 50_000
MIN_FETCH_DEADLINE_S = 1.0
PNG = "image/png"
WAITING_PER_FETCH = 4  # work taken in beyond the fetch places, waiting for its host's turn
STALE_PER_BATCH = 500  # due records past their start window one batch may skip besides its work


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
        cache: GlobalTable | None = None,
        job_types: Mapping[str, JobType] | None = None,
        browser: BrowserRenderer | None = None,
        routes: Routes | None = None,
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self._cache = cache
        self._job_types = dict(job_types or {})
        self._browser = browser
        self._routes = routes
        self._runnable = frozenset({HTTP_FETCH, *self._job_types, *([BROWSER_RENDER] if browser else [])})
        self._fetcher = fetcher
        self._artifacts = artifacts
        self._publisher = publisher
        self._reports = Flusher(publisher)
        self._dead = dead_letters
        self._clock = clock
        self._commands = settings.topic("commands")
        self._slots = Slots(settings.executor_concurrency * WAITING_PER_FETCH)
        self._fetching = asyncio.Semaphore(max(settings.executor_concurrency, 1))
        self._politeness = politeness_of(settings)
        self._robots = RobotsRules()
        self.max_batch = max(settings.executor_concurrency, 1)
        self.topics = frozenset(settings.due_topic(runner) for runner in self._runnable)
        self.not_started = 0
        self.revocations = 0
        self.invalidated = 0  # cache entries found pointing at artifacts that are gone
        self.held_back = 0  # work not started because its job type is switched off
        self._started: OrderedDict[UUID, None] = OrderedDict()
        self._running: dict[UUID, asyncio.Task[None]] = {}  # by lease
        self._renewals = Renewals(self._reports, self._commands, clock)

    def capacity(self) -> int:
        return self._slots.free()

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

    async def handle(self, records: Sequence[Record]) -> None:
        now = self._clock()
        startable: list[DueWork] = []
        immediate: list[Outgoing] = []
        not_started = self.not_started
        for record in records:
            try:
                work = decode_as(record.value or b"", DueWork, LeaseRevoked)
            except CodecError as exc:
                immediate.append(self._dead.of(record, f"undecodable due work: {exc}"))
                continue
            if isinstance(work, LeaseRevoked):
                startable = [due for due in startable if due.lease_id != work.lease_id]  # not started yet
                self._revoke(work)
            elif not isinstance(work, DueWork):
                continue
            elif work.job_type not in self._runnable or (self._browser is None and _rendered(work)):
                immediate.append(self._report_message(work, _unsupported(work, now), now))
            elif now > _start_by(work):
                self.not_started += 1
            elif work.lease_id not in self._started:  # due work published twice carries the same lease
                self._remember_started(work.lease_id)
                startable.append(work)
        _log_not_started(self.not_started - not_started)
        if immediate:
            await self._publisher.send_all(immediate)
        for work in startable:
            self._running[work.lease_id] = self._slots.start(self._attempt(work))

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

    def _report_message(self, work: DueWork, attempt: Attempt, now: datetime) -> Outgoing:
        values = {
            "command_id": name_based(work.lease_id, "report"),
            "job_id": work.job_id,
            "attempt": attempt,
        }
        report = build(ReportAttempt, values)
        return outgoing(self._commands, work.job_id, report, at=now)

    async def _attempt(self, work: DueWork) -> None:
        try:
            attempt = await self._run(work)
        finally:
            self._running.pop(work.lease_id, None)  # a revocation from here on finds nothing to stop
        if attempt is not None:
            await self._report(work, attempt)

    async def _run(self, work: DueWork) -> Attempt | None:
        """The attempt to report; None when its start window passed while it waited, or when its job
        type is switched off (its lease then lapses uncharged, and it is dispatched again)."""
        if self._switched_off(work):
            return None
        unusable = self._unusable_credential(work)
        if unusable is not None:
            return unusable
        job_type = self._job_types.get(work.job_type)
        if job_type is not None:
            return await self._run_job_type(work, job_type)
        limits = self._settings.policy_classes[work.policy_class]
        entry = self._cache_entry(work)
        cached = None if limits.obey_robots else await self._from_cache(work, entry, limits)
        if cached is not None:
            return cached
        async with self._politeness.turn(host_of(work.request.url)) as gate:
            if limits.obey_robots:  # before the cache too: a cached page answers only what may be fetched
                verdict = await self._robots_verdict(work, gate)
                if verdict is not Verdict.ALLOWED:
                    return self._denied(work, verdict)
                cached = await self._from_cache(work, entry, limits)
                if cached is not None:
                    return cached
            await gate.ready()  # before taking a fetch place, so a slow host holds none
            passage = await self._reserve(work, limits)  # waits on the ledger holding no fetch place
            if isinstance(passage, Denial):
                return self._route_denied(work, passage)
            async with self._fetching:
                if not self._startable(work):
                    await self._reconcile(passage, 0, ZERO)  # released: it carried nothing
                    return None
                self._renewals.add(work)
                try:
                    return await self._run_fetch(work, entry, gate, limits, passage)
                finally:
                    self._renewals.discard(work)

    def _switched_off(self, work: DueWork) -> bool:
        if self._cache is None or work.job_type not in self._cache.disabled:
            return False
        self.held_back += 1
        log.info("job %s: job type %s is switched off; its work waits", work.job_id, work.job_type)
        return True

    def _startable(self, work: DueWork) -> bool:
        if self._switched_off(work):  # switched off while it waited for its turn
            return False
        if self._clock() <= _start_by(work):
            return True
        self.not_started += 1
        log.info("job %s attempt %d: start window passed while it waited", work.job_id, work.attempt_number)
        return False

    async def _run_job_type(self, work: DueWork, job_type: JobType) -> Attempt | None:
        """A plugin's run, bounded by the type's runtime; whatever it raises is a counted attempt."""
        async with self._fetching:
            if not self._startable(work):
                return None
            self._renewals.add(work)
            try:
                async with asyncio.timeout(self._run_ceiling_s(work)):
                    with carrying(self._credential(work)):
                        outcome = await job_type.run(work)
                result = result_of(outcome)  # a plugin's answer is checked like any outside input
            except TimeoutError as exc:
                return self._failed(work, "TIMEOUT", exc)
            except Exception as exc:  # the plugin's own failure: recorded and retried like any other
                log.warning("job %s: job type %s failed: %r", work.job_id, work.job_type, exc)
                return self._failed(work, "JOB_TYPE_FAILED", exc)
            finally:
                self._renewals.discard(work)
        return await self._stored_attempt(work, result)

    def _run_ceiling_s(self, work: DueWork) -> float:
        """The type's runtime; with none (`max_runtime_ms = 0`), until the job's deadline."""
        if work.max_runtime_ms == 0:
            return max((work.deadline_at - self._clock()).total_seconds(), MIN_FETCH_DEADLINE_S)
        return max(work.max_runtime_ms / 1000, MIN_FETCH_DEADLINE_S)

    async def _run_fetch(
        self,
        work: DueWork,
        entry: CacheEntry | None,
        gate: HostGate,
        limits: ResponseLimits,
        passage: Passage,
    ) -> Attempt:
        try:
            if _rendered(work) and self._browser is not None:
                return await self._render(self._browser, work, limits, gate, passage)
            refused = self._credential_refusal(work, proxied=passage.proxy_url is not None)
            if refused is not None:
                passage = await self._reconcile(passage, 0, ZERO)  # released: nothing was sent
                return self._attempt_of(
                    work, local_result("CREDENTIAL_NOT_ALLOWED", refused), (), passage=passage
                )
            result, reused = await self._fetch(work, entry, limits, gate, passage.proxy_url)
            passage = await self._reconcile(passage, result.wire_bytes, ZERO)
        except Exception as exc:  # the fetcher types every origin failure; this is a bug, still counted
            log.exception("job %s: the fetch raised", work.job_id)
            return self._failed(work, "FETCH_FAILED", exc, passage=passage)
        if reused is not None:
            return self._attempt_of(work, result, reused, passage=passage)
        return await self._stored_attempt(work, result, passage)

    async def _reserve(self, work: DueWork, limits: ResponseLimits) -> Passage | Denial:
        if self._routes is None:
            return Passage()
        return await self._routes.reserve(work, limits, self._clock())

    async def _reconcile(self, passage: Passage, wire_bytes: int, browser_seconds: Decimal) -> Passage:
        if self._routes is None:
            return replace(passage, browser_seconds=browser_seconds)
        return await self._routes.reconcile(passage, wire_bytes, browser_seconds, self._clock())

    def _route_denied(self, work: DueWork, denial: Denial) -> Attempt:
        denied = local_result(denial.code, denial.detail)
        if denial.retry_at is not None and denied.failure is not None:
            denied = replace(denied, failure=denied.failure.model_copy(update={"retry_at": denial.retry_at}))
        return self._attempt_of(work, denied, (), passage=denial.passage)

    async def _render(
        self,
        browser: BrowserRenderer,
        work: DueWork,
        limits: ResponseLimits,
        gate: HostGate,
        passage: Passage,
    ) -> Attempt:
        """The page rendered by the browser, its HTML (and screenshot) stored."""
        await gate.request()
        rendered = await browser.render(
            work.request,
            work.render or RenderOptions(),
            FetchLimits.of(limits),
            call_deadline_s(work.max_runtime_ms, limits),
            screenshot=work.capture_mode is CaptureMode.SCREENSHOT,
        )
        self._observe(rendered.result)
        reconciled = await self._reconcile(passage, rendered.result.wire_bytes, rendered.browser_seconds)
        passage = replace(reconciled, blocked=rendered.blocked)
        return await self._stored_attempt(work, rendered.result, passage, rendered.screenshot)

    async def _stored_attempt(
        self,
        work: DueWork,
        result: FetchResult,
        passage: Passage | None = None,
        screenshot: bytes | None = None,
    ) -> Attempt:
        """The attempt with its body (and screenshot) stored; a store that fails makes it a counted
        failure."""
        try:
            artifacts = await self._store(work, result)
            if screenshot is not None and result.outcome is AttemptOutcome.FETCHED:
                shot = await self._artifacts.put(screenshot, PNG, work.retention_class, self._clock())
                artifacts = (*artifacts, shot)
        except Exception as exc:
            log.warning("job %s: storing the body failed: %s", work.job_id, exc)
            return self._failed(work, "ARTIFACT_STORE_FAILED", exc, result, passage)
        return self._attempt_of(work, result, artifacts, passage=passage)

    def _cache_entry(self, work: DueWork) -> CacheEntry | None:
        """The entry answering `work`: a metadata-only job is answered by a stored page too. The cache
        holds origin responses for anyone: not rendered pages, nor answers to a credential."""
        cache = self._cache
        if cache is None or _rendered(work) or work.credential is not None or not work.request_hash:
            return None
        try:
            key = cache_key(work.request_hash, work.capture_mode)
            entry = cache.get(key)
            if entry is None and key != work.request_hash:
                entry = cache.get(work.request_hash)
        except Exception as exc:  # a cache that cannot be read is a miss, not a failed attempt
            log.warning("job %s: the response cache could not be read: %s", work.job_id, exc)
            return None
        return entry

    async def _from_cache(
        self, work: DueWork, entry: CacheEntry | None, limits: ResponseLimits
    ) -> Attempt | None:
        """The attempt a valid cache entry answers with, no request made; None to fetch."""
        now = self._clock()
        if entry is None or not answers(
            entry, work.cache_mode, work.retention_class, now, caps_of(limits), work.request.headers
        ):
            return None
        try:
            if not await self._stored(entry):
                await self._invalidate(entry)
                return None  # fetch: a stored page makes a new entry
        except Exception as exc:  # a store that cannot say is a miss, not a failed attempt
            log.warning("job %s: the cached artifacts could not be checked: %s", work.job_id, exc)
            return None
        outcome, failure = cached_outcome(entry, now)
        result = FetchResult(outcome=outcome, failure=failure, http_status=entry.http_status)
        return self._attempt_of(work, result, entry.artifacts, cached=entry)

    async def _robots_verdict(self, work: DueWork, gate: HostGate) -> Verdict:
        url = work.request.url
        rules = self._robots.known(url)
        if rules is None:

            async def fetch(request: Request, timeout_s: float, limits: FetchLimits) -> FetchResult:
                await gate.request()
                return await self._fetcher.fetch(request, timeout_s, None, None, limits)

            rules = await self._robots.fetch(url, fetch)
        return rules.verdict(url)

    def _denied(self, work: DueWork, verdict: Verdict) -> Attempt:
        return self._attempt_of(work, local_result(verdict.value, work.request.url), ())

    async def _fetch(
        self,
        work: DueWork,
        entry: CacheEntry | None,
        limits: ResponseLimits,
        gate: HostGate,
        proxy_url: str | None = None,
    ) -> tuple[FetchResult, tuple[Artifact, ...] | None]:
        """The origin's answer, and the stored artifacts a 304 to a revalidation lets the job reuse."""
        deadline_s = call_deadline_s(work.max_runtime_ms, limits)
        fetch_limits = FetchLimits.of(limits)
        validators = revalidation_headers(
            entry, work.cache_mode, work.retention_class, self._clock(), caps_of(limits), work.request.headers
        )
        await gate.request()
        result = await self._fetcher.fetch(
            work.request,
            deadline_s,
            work.deadline_at,
            validators,
            fetch_limits,
            proxy_url,
            self._credential(work),
        )
        self._observe(result)
        if entry is None or not validators or result.http_status != 304:
            return result, None
        if await self._stored(entry):
            etag, last_modified = result.etag or entry.etag, result.last_modified or entry.last_modified
            revalidated = replace(
                result,
                outcome=AttemptOutcome.NOT_MODIFIED,
                failure=None,
                etag=etag,
                last_modified=last_modified,
            )
            return revalidated, entry.artifacts
        await self._invalidate(entry)
        left = fetch_limits.max_redirects + 1 - result.requests  # the refetch is within the same requests
        if left < 1:
            spent = local_result("REQUEST_BUDGET_SPENT", f"{result.requests} requests made; the page is gone")
            return replace(spent, wire_bytes=result.wire_bytes, requests=result.requests), None
        await gate.request()  # the stored copy is gone: the whole page again
        again = await self._fetcher.fetch(
            work.request,
            deadline_s,
            work.deadline_at,
            None,
            replace(fetch_limits, max_redirects=left - 1),
            proxy_url,
            self._credential(work),
        )
        self._observe(again)
        return replace(
            again, wire_bytes=result.wire_bytes + again.wire_bytes, requests=result.requests + again.requests
        ), None

    def _unusable_credential(self, work: DueWork) -> Attempt | None:
        """The denied attempt of a job whose credential this worker lacks or may not send; else None."""
        if work.credential is not None and work.credential not in self._settings.credentials:
            detail = f"credential {work.credential!r} is not configured on this worker"
            return self._attempt_of(work, local_result("CREDENTIAL_UNAVAILABLE", detail), ())
        refused = self._credential_refusal(work, proxied=False)
        if refused is not None:
            return self._attempt_of(work, local_result("CREDENTIAL_NOT_ALLOWED", refused), ())
        return None

    def _credential_refusal(self, work: DueWork, proxied: bool) -> str | None:
        """Why the job's credential may not go where this attempt would send it (its grant's
        origins, and a proxy only if the grant says so), checked again however it was accepted."""
        held = None if work.credential is None else self._settings.credentials.get(work.credential)
        if held is None:
            return None
        grant = CredentialGrant(origins=frozenset(held.origins), through_proxy=held.through_proxy)
        refused = grant.use_refusal(origin_of(work.request.url), proxied)
        return None if refused is None else f"credential {work.credential!r}: {refused}"

    def _credential(self, work: DueWork) -> dict[str, str] | None:
        """The headers of the job's credential, from this worker's settings (checked held before)."""
        held = None if work.credential is None else self._settings.credentials.get(work.credential)
        return (
            None if held is None else {name: value.get_secret_value() for name, value in held.headers.items()}
        )

    async def _invalidate(self, entry: CacheEntry) -> None:
        """An entry whose artifacts are gone is removed where it was found, unless a newer one
        replaced it meanwhile; should the tombstone not be written, the next use finds it gone again."""
        key = entry.request_hash
        if self._cache is None or self._cache.get(key) != entry:
            return
        self._cache.hold([(key.encode(), None)])
        try:
            await self._publisher.send_all([tombstone(self._settings.topic("cache"), key.encode())])
        except Exception as exc:
            log.warning("the stale cache entry of %s could not be removed: %s", key, exc)
        self.invalidated += 1

    async def _stored(self, entry: CacheEntry) -> bool:
        keys = [artifact.key for artifact in entry.artifacts]
        return not keys or await self._artifacts.existing(keys) == set(keys)

    def _observe(self, result: FetchResult) -> None:
        if self._metrics is not None:
            self._metrics.fetch_seconds.observe(result.elapsed_ms / 1000)

    async def _store(self, work: DueWork, result: FetchResult) -> tuple[Artifact, ...]:
        if result.outcome is not AttemptOutcome.FETCHED or work.capture_mode is CaptureMode.METADATA_ONLY:
            return ()
        stored = await self._artifacts.put(
            result.body, result.content_type, work.retention_class, self._clock()
        )
        return (stored,)

    async def _report(self, work: DueWork, attempt: Attempt) -> None:
        """Publish the report, waiting out broker failures; the fetch is never redone for it."""
        message = self._report_message(work, attempt, self._clock())
        await self._reports.deliver(message, f"the report of job {work.job_id}")

    def _failed(
        self,
        work: DueWork,
        code: str,
        exc: Exception,
        result: FetchResult | None = None,
        passage: Passage | None = None,
    ) -> Attempt:
        outcome, failure = local_failure(code, f"{type(exc).__name__}: {exc}")
        base = result or FetchResult(outcome=outcome, failure=failure)
        failed = replace(base, outcome=outcome, failure=failure)
        return self._attempt_of(work, failed, (), passage=passage or Passage())

    def _attempt_of(
        self,
        work: DueWork,
        result: FetchResult,
        artifacts: tuple[Artifact, ...],
        cached: CacheEntry | None = None,
        passage: Passage | None = None,
    ) -> Attempt:
        via = passage or Passage()
        # Built without validating again: every value is this executor's own, of the field's type.
        return build(
            Attempt,
            {
                "attempt_number": work.attempt_number,
                "lease_id": work.lease_id,
                "route": via.route,
                "outcome": result.outcome,
                "trust": via.trust,
                "http_status": result.http_status,
                "final_url": result.final_url,
                "bytes": result.wire_bytes,
                "elapsed_ms": result.elapsed_ms,
                "failure": result.failure,
                "cost": build_with_defaults(
                    Cost,
                    {
                        "bytes": result.wire_bytes,
                        "estimated": via.estimated,
                        "actual": via.actual,
                        "browser_seconds": via.browser_seconds,
                    },
                ),
                "artifacts": artifacts,
                "etag": result.etag,
                "last_modified": result.last_modified,
                "finished_at": to_utc_millis(self._clock()),
                "from_cache": cached is not None,
                "fresh_for_ms": result.fresh_for_ms,
                "storable": result.storable and via.trust is ArtifactTrust.VERIFIED,
                "route_name": via.route_name,
                "blocked_requests": via.blocked,
                "requests": result.requests,
                "must_revalidate": result.must_revalidate,
                "cached_at": None if cached is None else cached.stored_at,
                "cache_entry_job_id": None if cached is None else cached.job_id,
            },
        )

    async def close(self) -> None:
        """Let running attempts finish within the shutdown grace; the rest are left to the reaper."""
        await self._slots.close(self._settings.shutdown_grace_s)
        await self._renewals.close()


def _rendered(work: DueWork) -> bool:
    return renders(work.job_type, work.transport_policy)


def result_of(outcome: Outcome) -> FetchResult:
    """A job type's outcome as the attempt it reports; its failure code is kept if well formed.
    `TypeError` for an answer that is not an `Outcome` of the declared field types."""
    _check_outcome(outcome)
    if outcome.failure_code is None:
        body = outcome.body or b""
        return FetchResult(
            outcome=AttemptOutcome.FETCHED,
            failure=None,
            http_status=outcome.http_status,
            final_url=outcome.final_url,
            body=body,
            content_type=clip(outcome.content_type, 256),
            wire_bytes=len(body),
        )
    code = outcome.failure_code if FAILURE_CODE.fullmatch(outcome.failure_code) else "JOB_TYPE_FAILED"
    disposition = FailureDisposition.RETRYABLE if outcome.retryable else FailureDisposition.TERMINAL
    failure = Failure(code=code, disposition=disposition, safe_message=clip(outcome.failure_message or code))
    kind = AttemptOutcome.HTTP_ERROR if outcome.http_status is not None else AttemptOutcome.NETWORK_ERROR
    return FetchResult(
        outcome=kind, failure=failure, http_status=outcome.http_status, final_url=outcome.final_url
    )


def _check_outcome(outcome: object) -> None:
    if not isinstance(outcome, Outcome):
        raise TypeError(f"run returned {type(outcome).__name__}, not an Outcome")
    expected: list[tuple[str, object, tuple[type, ...]]] = [
        ("body", outcome.body, (bytes, type(None))),
        ("content_type", outcome.content_type, (str,)),
        ("http_status", outcome.http_status, (int, type(None))),
        ("final_url", outcome.final_url, (str, type(None))),
        ("failure_code", outcome.failure_code, (str, type(None))),
        ("failure_message", outcome.failure_message, (str,)),
        ("retryable", outcome.retryable, (bool,)),
    ]
    for name, value, kinds in expected:
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise TypeError(f"Outcome.{name} is a {type(value).__name__}")
    if outcome.http_status is not None and not 100 <= outcome.http_status <= 599:
        raise TypeError(f"Outcome.http_status {outcome.http_status} is not an HTTP status")


def caps_of(limits: ResponseLimits) -> ResponseCaps:
    return ResponseCaps(limits.max_body_bytes, limits.max_decoded_bytes)


def politeness_of(settings: Settings) -> Politeness:
    default = HostLimit(settings.host_concurrency, settings.host_requests_per_s)
    overrides = {
        host: HostLimit(
            limit.concurrency or default.concurrency,
            default.requests_per_s if limit.requests_per_s is None else limit.requests_per_s,
        )
        for host, limit in settings.host_limits.items()
    }
    return Politeness(default, overrides)


def _log_not_started(count: int) -> None:
    if count:
        log.info("%d due records were past their start window in the queue: not started", count)


def _start_by(work: DueWork) -> datetime:
    if work.start_by is not None:
        return work.start_by
    return work.lease_expires_at - timedelta(milliseconds=work.max_runtime_ms)


def _unsupported(work: DueWork, now: datetime) -> Attempt:
    outcome, failure = local_failure("UNSUPPORTED_JOB_TYPE", f"job type {work.job_type!r} on this worker")
    return Attempt(
        attempt_number=work.attempt_number,
        lease_id=work.lease_id,
        route=TransportRoute.DIRECT,
        outcome=outcome,
        trust=ArtifactTrust.VERIFIED,
        failure=failure,
        finished_at=now,
    )
