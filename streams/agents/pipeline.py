"""One attempt of due work, from its turn to its stored result: a plugin's run, or a fetch or render
answered from the cache, checked against robots.txt, paced per host, taking a route, within one of
the worker's fetch places, its body stored. Whatever it raises is itself a counted attempt."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from uuid import UUID

import msgspec

from projections.artifacts import PNG
from projections.ledger import ZERO
from projections.lifecycle.identity import host_of
from projections.lifecycle.submission import renders
from schemas.enums import AttemptOutcome, CaptureMode
from schemas.records import Artifact, Attempt, RenderOptions
from schemas.work import CacheEntry, DueWork
from streams.agents.attempts import attempt_of, failed, result_of
from streams.agents.credentials import Credentials
from streams.agents.fair_places import FairPlaces
from streams.agents.origin_fetch import Fetching, OriginFetch
from streams.agents.renewals import Renewals
from streams.agents.response_cache import ResponseCache
from streams.artifacts.port import ArtifactStore
from streams.fetch.browser import BrowserRenderer
from streams.fetch.http import FetchLimits, FetchResult, HttpFetcher, call_deadline_s, local_result
from streams.fetch.politeness import HostLimit, Politeness
from streams.fetch.robots import Verdict
from streams.fetch.routes import Denial, Passage, Routes
from streams.jobtypes import JobType, carrying
from streams.runtime.metrics import Metrics
from streams.runtime.trace_context import span, waiting
from streams.settings import ResponseLimits, Settings

log = logging.getLogger(__name__)
MIN_FETCH_DEADLINE_S = 1.0


class AttemptPipeline:
    def __init__(
        self,
        settings: Settings,
        fetcher: HttpFetcher,
        artifacts: ArtifactStore,
        cache: ResponseCache,
        renewals: Renewals,
        clock: Callable[[], datetime],
        switched_off: Callable[[], Mapping[str, str]],
        metrics: Metrics | None = None,
        job_types: Mapping[str, JobType] | None = None,
        browser: BrowserRenderer | None = None,
        routes: Routes | None = None,
    ) -> None:
        self._settings = settings
        self._fetcher = fetcher
        self._artifacts = artifacts
        self._cache = cache
        self._renewals = renewals
        self._clock = clock
        self._switched = switched_off
        self._metrics = metrics
        self._job_types = dict(job_types or {})
        self._browser = browser
        self._routes = routes
        self._credentials = Credentials(settings)
        self._places = FairPlaces(settings.executor_concurrency, settings.executor_caller_share)
        self._politeness = politeness_of(settings)
        self._origin = OriginFetch(fetcher, cache, self._credentials, self._observe)
        self.not_started = 0  # work whose start window passed while it waited for its turn
        self.begun: set[UUID] = set()  # leases whose work took a fetch place: a request may have gone out
        self.held_back = 0  # work not started because its job type is switched off

    async def run(self, work: DueWork) -> Attempt | None:
        """The attempt to report; None when its start window passed while it waited, or when its job
        type is switched off (its lease then lapses uncharged, and it is dispatched again)."""
        if self._switched_off(work):
            return None
        unusable = self._credentials.unusable(work)
        if unusable is not None:
            return self._attempt(work, unusable)
        job_type = self._job_types.get(work.job_type)
        if job_type is not None:
            return await self._run_job_type(work, job_type)
        limits = self._settings.policy_classes[work.policy_class]
        entry = self._cache.entry(work)
        cached = None if limits.obey_robots else await self._from_cache(work, entry, limits)
        if cached is not None:
            return cached
        async with self._politeness.turn(host_of(work.request.url)) as gate:
            if limits.obey_robots:  # before the cache too: a cached page answers only what may be fetched
                verdict = await self._origin.robots_verdict(work, gate)
                if verdict is not Verdict.ALLOWED:
                    return self._attempt(work, local_result(verdict.value, work.request.url))
                cached = await self._from_cache(work, entry, limits)
                if cached is not None:
                    return cached
            with waiting("scrapestream wait politeness", "politeness"):
                await gate.ready()  # before taking a fetch place, so a slow host holds none
            with waiting("scrapestream wait route_budget", "route_budget"):
                passage = await self._reserve(work, limits)  # waits on the ledger holding no fetch place
            if isinstance(passage, Denial):
                return self._route_denied(work, passage)
            return await self._in_fetch_place(Fetching(work, entry, limits, gate, passage))

    async def _in_fetch_place(self, fetching: Fetching) -> Attempt | None:
        """The fetch, once it holds one of the worker's fetch places; its route's reservation is
        released if it is stopped or revoked before that."""
        work, passage = fetching.work, fetching.passage
        try:
            async with self._places.held(work.caller_identity):
                if not self._startable(work):
                    await self._reconcile(passage, 0, ZERO)  # released: it carried nothing
                    return None
                self._begin(work)
                try:
                    return await self._run_fetch(fetching)
                finally:
                    self._renewals.discard(work)
        except asyncio.CancelledError:
            if work.lease_id not in self.begun:
                await self._reconcile(passage, 0, ZERO)
            raise

    def _begin(self, work: DueWork) -> None:
        self.begun.add(work.lease_id)
        self._renewals.add(work)

    def _switched_off(self, work: DueWork) -> bool:
        if work.job_type not in self._switched():
            return False
        self.held_back += 1
        log.info("job %s: job type %s is switched off; its work waits", work.job_id, work.job_type)
        return True

    def _startable(self, work: DueWork) -> bool:
        if self._switched_off(work):  # switched off while it waited for its turn
            return False
        if self._clock() <= start_by(work):
            return True
        self.not_started += 1
        log.info("job %s attempt %d: start window passed while it waited", work.job_id, work.attempt_number)
        return False

    async def _run_job_type(self, work: DueWork, job_type: JobType) -> Attempt | None:
        """A plugin's run, bounded by the type's runtime; whatever it raises is a counted attempt."""
        async with self._places.held(work.caller_identity):
            if not self._startable(work):
                return None
            self._begin(work)
            try:
                async with asyncio.timeout(self._run_ceiling_s(work)):
                    with carrying(self._credentials.headers(work)):
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

    async def _run_fetch(self, fetching: Fetching) -> Attempt:
        work, passage = fetching.work, fetching.passage
        try:
            if renders(work.job_type, work.transport_policy) and self._browser is not None:
                return await self._render(self._browser, fetching)
            refused = self._credentials.refusal(work, proxied=passage.proxy_url is not None)
            if refused is not None:
                passage = await self._reconcile(passage, 0, ZERO)  # released: nothing was sent
                return self._attempt(work, local_result("CREDENTIAL_NOT_ALLOWED", refused), passage=passage)
            result, reused = await self._origin.fetch(replace(fetching, passage=passage))
            passage = await self._reconcile(passage, result.wire_bytes, ZERO)
        except Exception as exc:  # the fetcher types every origin failure; this is a bug, still counted
            log.exception("job %s: the fetch raised", work.job_id)
            return self._failed(work, "FETCH_FAILED", exc, passage=passage)
        if reused is not None:
            return self._attempt(work, result, reused, passage=passage)
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
            denied = replace(
                denied, failure=msgspec.structs.replace(denied.failure, retry_at=denial.retry_at)
            )
        return self._attempt(work, denied, passage=denial.passage)

    async def _render(self, browser: BrowserRenderer, fetching: Fetching) -> Attempt:
        """The page rendered by the browser, its HTML (and screenshot) stored."""
        work, limits = fetching.work, fetching.limits
        await fetching.gate.request()
        with span("scrapestream render", attributes={"scrapestream.capture": work.capture_mode.value}):
            rendered = await browser.render(
                work.request,
                work.render or RenderOptions(),
                FetchLimits.of(limits),
                call_deadline_s(work.max_runtime_ms, limits),
                screenshot=work.capture_mode is CaptureMode.SCREENSHOT,
            )
        self._observe(rendered.result)
        reconciled = await self._reconcile(
            fetching.passage, rendered.result.wire_bytes, rendered.browser_seconds
        )
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
            with span("scrapestream store", attributes={"scrapestream.bytes": len(result.body)}):
                artifacts = await self._store(work, result)
                if screenshot is not None and result.outcome is AttemptOutcome.FETCHED:
                    shot = await self._artifacts.put(screenshot, PNG, work.retention_class, self._clock())
                    artifacts = (*artifacts, shot)
        except Exception as exc:
            log.warning("job %s: storing the body failed: %s", work.job_id, exc)
            return self._failed(work, "ARTIFACT_STORE_FAILED", exc, result, passage)
        return self._attempt(work, result, artifacts, passage=passage)

    async def _from_cache(
        self, work: DueWork, entry: CacheEntry | None, limits: ResponseLimits
    ) -> Attempt | None:
        """The attempt a valid cache entry answers with, no request made; None to fetch."""
        answered = await self._cache.answer(work, entry, limits)
        if answered is None or entry is None:
            return None
        return self._attempt(work, answered, entry.artifacts, cached=entry)

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

    def _failed(
        self,
        work: DueWork,
        code: str,
        exc: Exception,
        result: FetchResult | None = None,
        passage: Passage | None = None,
    ) -> Attempt:
        return self._attempt(work, failed(code, f"{type(exc).__name__}: {exc}", result), passage=passage)

    def _attempt(
        self,
        work: DueWork,
        result: FetchResult,
        artifacts: tuple[Artifact, ...] = (),
        cached: CacheEntry | None = None,
        passage: Passage | None = None,
    ) -> Attempt:
        return attempt_of(
            work.attempt_number, work.lease_id, result, self._clock(), artifacts, cached, passage
        )


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


def start_by(work: DueWork) -> datetime:
    if work.start_by is not None:
        return work.start_by
    return work.lease_expires_at - timedelta(milliseconds=work.max_runtime_ms)
