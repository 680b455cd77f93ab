"""The `Attempt` an executor reports, built one way wherever the work ran (a fetch, a render, a
plugin's run here, or a remote executor's report), and a job type's `Outcome` checked as outside input."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from uuid import UUID

from projections.lifecycle.limits import clip
from projections.lifecycle.outcomes import local_failure
from schemas.enums import ArtifactTrust, AttemptOutcome, FailureDisposition
from schemas.records import Artifact, Attempt, Cost, Failure
from schemas.work import CacheEntry
from streams.fetch.http import FetchResult
from streams.fetch.routes import Passage
from streams.jobtypes import Outcome

FAILURE_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")


def attempt_of(
    attempt_number: int,
    lease_id: UUID,
    result: FetchResult,
    finished_at: datetime,
    artifacts: tuple[Artifact, ...] = (),
    cached: CacheEntry | None = None,
    passage: Passage | None = None,
) -> Attempt:
    via = passage or Passage()
    # Every value is of its field's type: outside values were checked into the `FetchResult` first.
    return Attempt(
        attempt_number=attempt_number,
        lease_id=lease_id,
        route=via.route,
        outcome=result.outcome,
        trust=via.trust,
        http_status=result.http_status,
        final_url=result.final_url,
        bytes=result.wire_bytes,
        elapsed_ms=result.elapsed_ms,
        failure=result.failure,
        cost=Cost(
            bytes=result.wire_bytes,
            estimated=via.estimated,
            actual=via.actual,
            browser_seconds=via.browser_seconds,
        ),
        artifacts=artifacts,
        etag=result.etag,
        last_modified=result.last_modified,
        finished_at=finished_at,
        from_cache=cached is not None,
        fresh_for_ms=result.fresh_for_ms,
        storable=result.storable and via.trust is ArtifactTrust.VERIFIED,
        route_name=via.route_name,
        blocked_requests=via.blocked,
        requests=result.requests,
        must_revalidate=result.must_revalidate,
        cached_at=None if cached is None else cached.stored_at,
        cache_entry_job_id=None if cached is None else cached.job_id,
    )


def failed(code: str, detail: str, result: FetchResult | None = None) -> FetchResult:
    """`result` (or nothing fetched) ending in a failure of this worker's own, `code`."""
    outcome, failure = local_failure(code, detail)
    return replace(result or FetchResult(outcome=outcome, failure=failure), outcome=outcome, failure=failure)


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
