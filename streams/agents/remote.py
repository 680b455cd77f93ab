"""Reports of remotely run job types, on the trusted worker that owns the job.

An outside executor reads the type's due topic and reports through the submit topic (intake checks
its signature and that its principal `runs` the type). Here its result is checked against the
type's declared result schema, the type's own `outcome` hook turns it into what is stored (the
executor never decides what is kept, nor under which key: objects are content-addressed), and the
attempt goes to the lifecycle like any other, fenced by its lease. A result that fails its schema
is the recorded, typed failure `RESULT_SCHEMA_MISMATCH`.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any
from uuid import uuid4

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from projections.lifecycle.decide import lease_refusal
from projections.lifecycle.limits import clip
from projections.lifecycle.outcomes import local_failure
from projections.lifecycle.state import Job
from schemas.codec import SINGLE_OBJECT_MARKER
from schemas.commands import Command, RenewLease, ReportAttempt, ReportRemoteAttempt, StartAttempt
from schemas.enums import AttemptOutcome, ReportKind
from schemas.records import Artifact, Attempt, Failure
from streams.agents.attempts import attempt_of, result_of
from streams.artifacts.port import ArtifactStore
from streams.artifacts.uploads import UploadRefusedError, Uploads
from streams.fetch.http import FetchResult
from streams.jobtypes import AnyJobType, Outcome, RemoteJobType, is_remote

log = logging.getLogger(__name__)
MAX_MESSAGE_BYTES = 1_024


class ResultMismatchError(ValueError):
    """A reported result that is not a record of the type's declared result schema."""


class RemoteResults:
    def __init__(
        self,
        job_types: Mapping[str, AnyJobType],
        artifacts: ArtifactStore,
        clock: Callable[[], datetime],
        uploads: Uploads | None = None,
    ) -> None:
        self._types: dict[str, RemoteJobType] = {n: t for n, t in job_types.items() if is_remote(t)}
        self._schemas = {name: _parsed(job_type.result_schema) for name, job_type in self._types.items()}
        self._artifacts = artifacts
        self._clock = clock
        self.uploads = uploads

    def runs(self, job_type: str) -> bool:
        """Whether `job_type` is run remotely and its plugin is installed here."""
        return job_type in self._types

    async def attempt(self, report: ReportRemoteAttempt, job: Job) -> Attempt:
        """The attempt a report of the job's current lease stands for, its outcome stored here."""
        if report.failure_code is not None:
            message = clip(report.failure_message, MAX_MESSAGE_BYTES)
            fetched = result_of(
                Outcome(failure_code=report.failure_code, failure_message=message, retryable=report.retryable)
            )
        else:
            try:
                result = self.checked(report.job_type, self._result_bytes(report))
            except UploadRefusedError as exc:
                return self._failed(report, "RESULT_NOT_UPLOADED", str(exc))
            except ResultMismatchError as exc:
                return self._failed(report, "RESULT_SCHEMA_MISMATCH", str(exc))
            try:
                fetched = result_of(self._types[report.job_type].outcome(result))
            except Exception as exc:  # the type's own hook failed: counted and retried like a run
                log.warning("job %s: %s's outcome hook failed: %r", report.job_id, report.job_type, exc)
                return self._failed(report, "JOB_TYPE_FAILED", f"{type(exc).__name__}: {exc}")
        artifacts: tuple[Artifact, ...] = ()
        if fetched.outcome is AttemptOutcome.FETCHED:
            try:
                stored = await self._artifacts.put(
                    fetched.body, fetched.content_type, job.accepted.retention_class, self._clock()
                )
            except Exception as exc:
                log.warning("job %s: storing the remote result failed: %s", report.job_id, exc)
                return self._failed(report, "ARTIFACT_STORE_FAILED", f"{type(exc).__name__}: {exc}")
            artifacts = (stored,)
        return self._attempt(report, fetched.outcome, fetched.failure, artifacts, len(fetched.body))

    def _result_bytes(self, report: ReportRemoteAttempt) -> bytes | None:
        """The result in the record, or the one uploaded for this attempt (never both)."""
        if report.result_key is None:
            return report.result_body
        if report.result_body is not None or self.uploads is None:
            raise ResultMismatchError("a report carries its result or a result_key of an upload, not both")
        return self.uploads.taken(report.job_id, report.lease_id, report.result_key)

    async def command_of(self, report: ReportRemoteAttempt, job: Job | None) -> Command | str:
        """A remote executor's start, renewal or outcome as the command it stands for (an outcome
        checked and stored here, then fenced by its lease like any report), or why it is dead input."""
        if not self.runs(report.job_type):
            return f"job type {report.job_type[:64]!r} is not run remotely on this deployment"
        if job is None or job.accepted.job_type != report.job_type:
            return f"no job {report.job_id} of type {report.job_type[:64]!r}"
        command_id = report.command_id or uuid4()
        job_id, attempt_number, lease_id = report.job_id, report.attempt_number, report.lease_id
        if report.kind is ReportKind.START:
            return StartAttempt(
                command_id=command_id, job_id=job_id, attempt_number=attempt_number, lease_id=lease_id
            )
        if report.kind is ReportKind.RENEWAL:
            return RenewLease(
                command_id=command_id, job_id=job_id, attempt_number=attempt_number, lease_id=lease_id
            )
        if lease_refusal(job, report.attempt_number, report.lease_id) is not None:
            attempt = self.unstored(report)  # fenced before anything is stored
        else:
            attempt = await self.attempt(report, job)
        return ReportAttempt(command_id=command_id, job_id=report.job_id, attempt=attempt)

    def unstored(self, report: ReportRemoteAttempt) -> Attempt:
        """A stale report as the lifecycle records it: nothing of its result looked at or kept."""
        return self._attempt(report, AttemptOutcome.NETWORK_ERROR, None, (), 0)

    def checked(self, job_type: str, result: bytes | None) -> Mapping[str, Any]:
        """The result as a record of the type's declared schema: single-object encoded with exactly
        that schema, and nothing after it."""
        parsed, declared = self._schemas[job_type]
        if result is None:
            raise ResultMismatchError("the report holds neither a result nor a failure")
        header = SINGLE_OBJECT_MARKER + declared
        if not result.startswith(header):
            raise ResultMismatchError(
                f"the result is not single-object encoded with {job_type}'s result schema"
            )
        body = io.BytesIO(result[len(header) :])
        try:
            record = fastavro.schemaless_reader(body, parsed)
        except Exception as exc:
            raise ResultMismatchError(f"the result does not decode as {job_type}'s result: {exc}") from exc
        if body.tell() != len(result) - len(header) or not isinstance(record, dict):
            raise ResultMismatchError(f"the result has bytes after {job_type}'s result record")
        return record

    def _failed(self, report: ReportRemoteAttempt, code: str, detail: str) -> Attempt:
        outcome, failure = local_failure(code, detail)
        return self._attempt(report, outcome, failure, (), 0)

    def _attempt(
        self,
        report: ReportRemoteAttempt,
        outcome: AttemptOutcome,
        failure: Failure | None,
        artifacts: tuple[Artifact, ...],
        size: int,
    ) -> Attempt:
        elapsed_ms = max(min(report.elapsed_ms, 2**31 - 1), 0)
        # A remote result is not an origin's answer: never a cache entry.
        result = FetchResult(outcome, failure, wire_bytes=size, elapsed_ms=elapsed_ms, storable=False)
        return attempt_of(report.attempt_number, report.lease_id, result, self._clock(), artifacts)


def _parsed(schema: Mapping[str, Any]) -> tuple[Any, bytes]:
    parsed = fastavro.parse_schema(dict(schema))
    return parsed, bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))
