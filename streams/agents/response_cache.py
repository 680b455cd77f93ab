"""The response cache as an executor uses it: the entry that may answer a job, the answer it gives
with no request made, the validators of a revalidation, and an entry dropped once its stored
artifacts are found gone."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from projections.lifecycle.cache import answers, cache_key, cached_outcome, revalidation_headers
from projections.lifecycle.submission import renders
from schemas.work import CacheEntry, DueWork
from streams.artifacts.port import ArtifactStore
from streams.fetch.http import FetchResult, caps_of
from streams.readers.global_table import GlobalTable
from streams.runtime.publisher import Sink, tombstone
from streams.settings import ResponseLimits

log = logging.getLogger(__name__)


class ResponseCache:
    def __init__(
        self,
        table: GlobalTable | None,
        artifacts: ArtifactStore,
        publisher: Sink,
        topic: str,
        clock: Callable[[], datetime],
    ) -> None:
        self._table = table
        self._artifacts = artifacts
        self._publisher = publisher
        self._topic = topic
        self._clock = clock
        self.invalidated = 0  # entries found pointing at artifacts that are gone

    def entry(self, work: DueWork) -> CacheEntry | None:
        """The entry answering `work`: a metadata-only job is answered by a stored page too. The cache
        holds origin responses for anyone: not rendered pages, nor answers to a credential."""
        table = self._table
        rendered = renders(work.job_type, work.transport_policy)
        if table is None or rendered or work.credential is not None or not work.request_hash:
            return None
        try:
            key = cache_key(work.request_hash, work.capture_mode)
            entry = table.get(key)
            if entry is None and key != work.request_hash:
                entry = table.get(work.request_hash)
        except Exception as exc:  # a cache that cannot be read is a miss, not a failed attempt
            log.warning("job %s: the response cache could not be read: %s", work.job_id, exc)
            return None
        return entry

    async def answer(
        self, work: DueWork, entry: CacheEntry | None, limits: ResponseLimits
    ) -> FetchResult | None:
        """What a valid entry answers, no request made; None to fetch."""
        now = self._clock()
        if entry is None or not answers(
            entry, work.cache_mode, work.retention_class, now, caps_of(limits), work.request.headers
        ):
            return None
        try:
            if not await self.stored(entry):
                await self.invalidate(entry)
                return None  # fetch: a stored page makes a new entry
        except Exception as exc:  # a store that cannot say is a miss, not a failed attempt
            log.warning("job %s: the cached artifacts could not be checked: %s", work.job_id, exc)
            return None
        outcome, failure = cached_outcome(entry, now)
        return FetchResult(outcome=outcome, failure=failure, http_status=entry.http_status)

    def validators(self, work: DueWork, entry: CacheEntry | None, limits: ResponseLimits) -> dict[str, str]:
        return revalidation_headers(
            entry, work.cache_mode, work.retention_class, self._clock(), caps_of(limits), work.request.headers
        )

    async def stored(self, entry: CacheEntry) -> bool:
        keys = [artifact.key for artifact in entry.artifacts]
        return not keys or await self._artifacts.existing(keys) == set(keys)

    async def invalidate(self, entry: CacheEntry) -> None:
        """An entry whose artifacts are gone is removed where it was found, unless a newer one
        replaced it meanwhile; should the tombstone not be written, the next use finds it gone again."""
        key = entry.request_hash
        if self._table is None or self._table.get(key) != entry:
            return
        self._table.hold([(key.encode(), None)])
        try:
            await self._publisher.send_all([tombstone(self._topic, key.encode())])
        except Exception as exc:
            log.warning("the stale cache entry of %s could not be removed: %s", key, exc)
        self.invalidated += 1
