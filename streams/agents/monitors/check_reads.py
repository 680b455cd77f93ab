"""Check reads: a monitor's fetched content, read beside the previous check's, reported to its monitor.

Text is read up to `MAX_PARSED_BYTES` (a PDF whole, up to `MAX_DOCUMENT_BYTES`) and compared in a
child process with memory and time limits (`reading_process`: bytes bound neither the parse nor the
diff of a hostile page); a visual monitor's screenshot is compared by its pixels there too, and the
image of a difference over its threshold stored; anything else is compared by its stored hash, never
read. A key no store writes, a store that fails or content that defeats the reader or its limits is
the check's outcome (`problem`), never a retried batch. A redelivered read reports the same command
id, which the monitor decides once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

import msgspec

from projections.artifacts import PNG, is_content_key
from projections.lifecycle.identity import name_based
from projections.monitors.content import Focus, read_limit, reading_of, text_diff
from projections.monitors.patterns import compiled
from projections.monitors.unreadable import UnreadableContentError
from projections.monitors.visual import MAX_IMAGE_BYTES, screenshot_comparison
from schemas.codec import decode_as
from schemas.commands import ReportCheckReading
from schemas.enums import RetentionClass
from schemas.records import Artifact, VisualDifference
from schemas.work import ReadCheck
from streams.agents.monitors.reading_process import ReadingLimitError, ReadingProcess
from streams.artifacts.port import ArtifactStore
from streams.artifacts.uploads import is_plain_key
from streams.runtime.commit_order import OUTSIDE, Batch
from streams.runtime.consumer import QuietStage, Record
from streams.runtime.deadinput import DeadLetters
from streams.runtime.publisher import Sink, outgoing
from streams.settings import Settings

log = logging.getLogger(__name__)


class CheckReads(QuietStage):
    name = "check-reads"
    max_batch = 16

    def __init__(
        self,
        settings: Settings,
        artifacts: ArtifactStore,
        publisher: Sink,
        dead_letters: DeadLetters,
        clock: Callable[[], datetime],
        reader: ReadingProcess,
    ) -> None:
        self._settings = settings
        self._reader = reader
        self._artifacts = artifacts
        self._publisher = publisher
        self._dead = dead_letters
        self._clock = clock
        self.topics = frozenset({settings.topic("checks")})

    async def handle(self, records: Sequence[Record], batch: Batch = OUTSIDE) -> None:
        usable, messages = self._dead.sort_out(records, _read_check_of, "check read")
        for _, work in usable:
            report = await self.read(work)
            messages.append(
                outgoing(self._settings.topic("commands"), work.monitor_id, report, at=self._clock())
            )
        await self._publisher.send_all(messages, batch)

    async def read(self, work: ReadCheck) -> ReportCheckReading:
        report = ReportCheckReading(
            monitor_id=work.monitor_id,
            command_id=name_based(work.check_job_id, "check-read"),
            check_job_id=work.check_job_id,
        )
        keys = [work.artifact.key, *([] if work.previous is None else [work.previous.key])]
        foreign = next((key for key in keys if not (is_content_key(key) or is_plain_key(key))), None)
        if foreign is not None:
            return msgspec.structs.replace(report, problem=f"{foreign[:80]!r} is no stored artifact's key")
        visual = work.visual_threshold is not None
        if not visual and read_limit(work.artifact.content_type, work.artifact.size_bytes) is None:
            return msgspec.structs.replace(report, fingerprint=work.artifact.sha256)
        try:
            return await (self._visually(report, work) if visual else self._textually(report, work))
        except ReadingLimitError as exc:
            log.warning("check %s was not read within a check's limits: %s", work.check_job_id, exc)
            return msgspec.structs.replace(report, problem=f"the page could not be read within limits: {exc}")
        except Exception as exc:  # a store that fails, content that defeats the reader: the check's outcome
            log.warning("check %s could not be read: %s", work.check_job_id, exc)
            problem = f"the stored content could not be read: {type(exc).__name__}"
            return msgspec.structs.replace(report, problem=problem)

    async def _textually(self, report: ReportCheckReading, work: ReadCheck) -> ReportCheckReading:
        body = await self._head(work.artifact)
        if body is None:
            return msgspec.structs.replace(report, problem="the check's stored content is gone")
        previous = None if work.previous is None else await self._head(work.previous)
        return await self._reader.run(_compared, report, work, body, previous)

    async def _visually(self, report: ReportCheckReading, work: ReadCheck) -> ReportCheckReading:
        """The screenshot against the previous check's; a difference over the threshold stored as an image."""
        body = await self._head(work.artifact, MAX_IMAGE_BYTES + 1)
        if body is None:
            return msgspec.structs.replace(report, problem="the check's stored content is gone")
        previous = None if work.previous is None else await self._head(work.previous, MAX_IMAGE_BYTES + 1)
        compared, difference = await self._reader.run(_compared_visually, report, work, body, previous)
        if difference is None or compared.visual is None:
            return compared
        stored = await self._artifacts.put(difference, PNG, RetentionClass.CACHE_7D, self._clock())
        return msgspec.structs.replace(
            compared, visual=msgspec.structs.replace(compared.visual, difference=stored)
        )

    async def _head(self, artifact: Artifact, limit: int | None = None) -> bytes | None:
        """What a reading takes of the bytes stored under the artifact's key (at most `limit`, else as
        its type says), or None when none are."""
        limit = limit or read_limit(artifact.content_type, artifact.size_bytes) or 0
        chunks = await self._artifacts.open(artifact.key)
        if chunks is None:
            return None
        body = bytearray()
        async for chunk in chunks:
            body += chunk
            if len(body) >= limit:
                break
        close = getattr(chunks, "aclose", None)
        if close is not None:  # the rest is never read: its file is closed now, not when collected
            await close()
        return bytes(body[:limit])


def _compared(
    report: ReportCheckReading, work: ReadCheck, body: bytes, previous: bytes | None
) -> ReportCheckReading:
    focus = Focus(work.watch, work.ignore, work.select, work.drop, work.insensitive, work.product)
    try:
        now = reading_of(body, work.artifact.content_type, focus)
    except UnreadableContentError as exc:
        return msgspec.structs.replace(report, problem=str(exc))
    if work.previous is not None and previous is None:  # its copy expired: compared by fingerprint only
        return msgspec.structs.replace(report, fingerprint=now.fingerprint, offer=now.offer)
    try:
        before = (
            None
            if previous is None or work.previous is None
            else reading_of(previous, work.previous.content_type, focus)
        )
    except UnreadableContentError:  # read before the monitor selected: all of it is new
        before = None
    diff = text_diff(
        "" if before is None else before.text or "",
        now.text or "",
        insensitive=work.insensitive,
        triggers=compiled(work.trigger, work.insensitive),
    )
    return msgspec.structs.replace(
        report,
        fingerprint=now.fingerprint,
        diff=diff.text,
        diff_truncated=diff.truncated,
        lines_added=diff.added,
        lines_removed=diff.removed,
        word_diff=diff.words,
        triggered=diff.triggered,
        offer=now.offer,
        previous_offer=None if before is None else before.offer,
    )


def _compared_visually(
    report: ReportCheckReading, work: ReadCheck, body: bytes, previous: bytes | None
) -> tuple[ReportCheckReading, bytes | None]:
    """The report of a screenshot against the previous one, and the difference image when it is above
    the monitor's threshold."""
    report = msgspec.structs.replace(report, fingerprint=work.artifact.sha256)
    threshold = work.visual_threshold or 0.0
    if previous is None:  # the first screenshot is all new; after an expired copy, its hash alone says
        first = VisualDifference(ratio=1.0, threshold=threshold) if work.previous is None else None
        return msgspec.structs.replace(report, visual=first), None
    try:
        comparison = screenshot_comparison(previous, body)
    except UnreadableContentError as exc:
        return msgspec.structs.replace(report, fingerprint=None, problem=str(exc)), None
    above = comparison.ratio > threshold
    visual = VisualDifference(ratio=comparison.ratio, threshold=threshold)
    return msgspec.structs.replace(
        report, visual=visual, triggered=above
    ), comparison.difference if above else None


def _read_check_of(record: Record) -> ReadCheck:
    return decode_as(record.value or b"", ReadCheck)
