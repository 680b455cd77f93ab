"""One fetch of due work from its origin, once it holds its turn, route and fetch place: asked
conditionally when the cache holds a copy (a 304 reuses the stored artifacts, or fetches the page
whole again when that copy is gone), with the job's credential headers; and robots.txt, known or
fetched within the host's pacing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from schemas.enums import AttemptOutcome
from schemas.records import Artifact, Request
from schemas.work import CacheEntry, DueWork
from streams.agents.credentials import Credentials
from streams.agents.response_cache import ResponseCache
from streams.fetch.http import FetchLimits, FetchResult, HttpFetcher, call_deadline_s, local_result
from streams.fetch.politeness import HostGate
from streams.fetch.robots import RobotsRules, Verdict
from streams.fetch.routes import Passage
from streams.settings import ResponseLimits


@dataclass(frozen=True)
class Fetching:
    """What one attempt's fetch goes on with: the work, its cache entry, its policy class's limits,
    its host's gate and its route's passage."""

    work: DueWork
    entry: CacheEntry | None
    limits: ResponseLimits
    gate: HostGate
    passage: Passage


class OriginFetch:
    def __init__(
        self,
        fetcher: HttpFetcher,
        cache: ResponseCache,
        credentials: Credentials,
        observe: Callable[[FetchResult], None],
    ) -> None:
        self._fetcher = fetcher
        self._cache = cache
        self._credentials = credentials
        self._observe = observe
        self._robots = RobotsRules()

    async def robots_verdict(self, work: DueWork, gate: HostGate) -> Verdict:
        url = work.request.url
        rules = self._robots.known(url)
        if rules is None:

            async def fetch(request: Request, timeout_s: float, limits: FetchLimits) -> FetchResult:
                await gate.request()
                return await self._fetcher.fetch(request, timeout_s, None, None, limits)

            rules = await self._robots.fetch(url, fetch)
        return rules.verdict(url)

    async def fetch(self, fetching: Fetching) -> tuple[FetchResult, tuple[Artifact, ...] | None]:
        """The origin's answer, and the stored artifacts a 304 to a revalidation lets the job reuse."""
        work, entry, limits, gate = fetching.work, fetching.entry, fetching.limits, fetching.gate
        proxy_url = fetching.passage.proxy_url
        deadline_s = call_deadline_s(work.max_runtime_ms, limits)
        fetch_limits = FetchLimits.of(limits)
        validators = self._cache.validators(work, entry, limits)
        await gate.request()
        headers = self._credentials.headers(work)
        result = await self._fetcher.fetch(
            work.request, deadline_s, work.deadline_at, validators, fetch_limits, proxy_url, headers
        )
        self._observe(result)
        if entry is None or not validators or result.http_status != 304:
            return result, None
        if await self._cache.stored(entry):
            etag, last_modified = result.etag or entry.etag, result.last_modified or entry.last_modified
            revalidated = replace(
                result,
                outcome=AttemptOutcome.NOT_MODIFIED,
                failure=None,
                etag=etag,
                last_modified=last_modified,
            )
            return revalidated, entry.artifacts
        await self._cache.invalidate(entry)
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
            headers,
        )
        self._observe(again)
        return replace(
            again, wire_bytes=result.wire_bytes + again.wire_bytes, requests=result.requests + again.requests
        ), None
