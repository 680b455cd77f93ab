"""The HTTP executor: runs due `http.fetch` work under its lease and reports the attempt.

It renews the lease on the derived interval while fetching, stores the body as a
content-addressed artifact, and reports with the lease it was given (the fencing token).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from datetime import datetime
from uuid import uuid5

from schemas.commands import RenewLease, ReportAttempt
from schemas.enums import ArtifactTrust, AttemptOutcome, CaptureMode, TransportRoute
from schemas.records import Artifact, Attempt, Cost
from schemas.work import DueWork
from streams.artifacts.local import LocalArtifactStore
from streams.fetch.http import FetchResult, HttpFetcher
from streams.publisher import Sink, outgoing
from streams.settings import Settings

log = logging.getLogger(__name__)
SUPPORTED_JOB_TYPES = frozenset({"http.fetch"})
MIN_FETCH_DEADLINE_S = 1.0


class HttpExecutor:
    def __init__(
        self,
        settings: Settings,
        fetcher: HttpFetcher,
        artifacts: LocalArtifactStore,
        publisher: Sink,
        clock: Callable[[], datetime],
    ) -> None:
        self._settings = settings
        self._fetcher = fetcher
        self._artifacts = artifacts
        self._publisher = publisher
        self._clock = clock

    async def run(self, work: DueWork) -> None:
        if work.job_type not in SUPPORTED_JOB_TYPES:
            return  # another executor's work
        if self._clock() >= work.lease_expires_at:
            log.info("job %s attempt %d: lease lapsed before it started", work.job_id, work.attempt_number)
            return
        renewing = asyncio.create_task(self._renew(work))
        try:
            deadline_s = max(work.max_runtime_ms / 1000, MIN_FETCH_DEADLINE_S)
            result = await self._fetcher.fetch(work.request, deadline_s)
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
        attempt = await self._attempt(work, result)
        report = ReportAttempt(command_id=uuid5(work.lease_id, "report"), job_id=work.job_id, attempt=attempt)
        await self._publisher.send(outgoing(self._settings.topic("commands"), str(work.job_id), report))

    async def _renew(self, work: DueWork) -> None:
        for renewal in itertools.count(1):
            await asyncio.sleep(work.renew_interval_ms / 1000)
            command = RenewLease(
                command_id=uuid5(work.lease_id, f"renew:{renewal}"),
                job_id=work.job_id,
                attempt_number=work.attempt_number,
                lease_id=work.lease_id,
            )
            await self._publisher.send(outgoing(self._settings.topic("commands"), str(work.job_id), command))

    async def _attempt(self, work: DueWork, result: FetchResult) -> Attempt:
        artifacts: tuple[Artifact, ...] = ()
        if result.outcome is AttemptOutcome.FETCHED and work.capture_mode is not CaptureMode.METADATA_ONLY:
            stored = await self._artifacts.put(
                result.body, result.content_type, work.retention_class, self._clock()
            )
            artifacts = (stored,)
        return Attempt(
            attempt_number=work.attempt_number,
            lease_id=work.lease_id,
            route=TransportRoute.DIRECT,
            outcome=result.outcome,
            trust=ArtifactTrust.VERIFIED,
            http_status=result.http_status,
            final_url=result.final_url,
            bytes=result.wire_bytes,
            elapsed_ms=result.elapsed_ms,
            failure=result.failure,
            cost=Cost(bytes=result.wire_bytes),
            artifacts=artifacts,
            etag=result.etag,
            last_modified=result.last_modified,
            finished_at=self._clock(),
        )
