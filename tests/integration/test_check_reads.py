"""Check reads on a real artifact directory: what a monitor's check stored, read beside the previous
check's, bounded whatever the page is; anything but text compared by its stored hash, never read."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from projections.monitors.content import MAX_DIFF_CHARS, MAX_PARSED_BYTES
from schemas.enums import RetentionClass
from schemas.records import Artifact
from schemas.work import ReadCheck
from streams.agents.monitors.check_reads import CheckReads
from streams.agents.monitors.reading_process import ReadingProcess
from streams.artifacts.local import LocalArtifactStore
from streams.settings import load_settings
from tests.unit.test_timers import RecordingSink

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path) -> LocalArtifactStore:
    return LocalArtifactStore(tmp_path / "artifacts")


@pytest.fixture(scope="module")
def reader() -> Iterator[ReadingProcess]:
    process = ReadingProcess(memory_bytes=384 * 2**20, time_limit_s=20)
    yield process
    process.close()


@pytest.fixture
def reads(reader: ReadingProcess) -> Callable[[LocalArtifactStore], CheckReads]:
    def made(store: LocalArtifactStore) -> CheckReads:
        return CheckReads(load_settings(), store, RecordingSink(), None, lambda: NOW, reader)  # type: ignore[arg-type]

    return made


async def stored(store: LocalArtifactStore, body: bytes, content_type: str = "text/html") -> Artifact:
    return await store.put(body, content_type, RetentionClass.CACHE_7D, NOW)


def work(current: Artifact, previous: Artifact | None, **focus: tuple[str, ...]) -> ReadCheck:
    return ReadCheck(monitor_id=uuid4(), check_job_id=uuid4(), artifact=current, previous=previous, **focus)


async def test_a_page_is_read_beside_the_previous_check_through_the_monitors_focus(store, reads):
    before = await stored(store, b"<main><p>Price: 9 EUR</p></main><footer class=clock>10:00</footer>")
    after = await stored(store, b"<main><p>Price: 10 EUR</p></main><footer class=clock>10:05</footer>")
    asked = work(after, before, ignore=(".clock",))
    report = await reads(store).read(asked)
    assert report.problem is None
    assert report.fingerprint == hashlib.sha256(b"Price: 10 EUR").hexdigest()
    assert "-Price: 9 EUR" in report.diff
    assert "+Price: 10 EUR" in report.diff
    assert "10:0" not in report.diff
    assert (report.lines_added, report.lines_removed) == (1, 1)
    again = await reads(store).read(asked)
    assert again == report  # a redelivered read is decided once


async def test_a_huge_page_and_endless_lines_give_a_bounded_diff(store, reads):
    before = await stored(store, b"<pre>" + b"old line\n" * 1000 + b"</pre>")
    endless = b"<pre>" + b"".join(b"line %d " % n + b"x" * 2_000 + b"\n" for n in range(20_000))
    after = await stored(store, endless + b"</pre>")
    assert after.size_bytes > 4 * MAX_PARSED_BYTES
    report = await reads(store).read(work(after, before))
    assert report.fingerprint is not None
    assert len(report.diff) <= MAX_DIFF_CHARS
    assert report.diff_truncated


async def test_binary_content_is_compared_by_its_hash_without_reading_it(store, reads):
    image = await stored(store, bytes(range(256)) * 4_096, "image/png")
    declared_html = await stored(store, b"\x00\xff\xfe" * 100_000, "text/html")
    report = await reads(store).read(work(image, None))
    assert (report.fingerprint, report.diff) == (image.sha256, "")
    hostile = await reads(store).read(work(declared_html, image))
    assert hostile.fingerprint is not None
    assert len(hostile.diff) <= MAX_DIFF_CHARS


async def test_content_gone_from_the_store_is_said_and_a_previous_one_gone_only_costs_the_diff(store, reads):
    now = await stored(store, b"<p>now</p>")
    gone = Artifact(
        artifact_id=uuid4(), key="sha256/00/gone", content_type="text/html", size_bytes=3, sha256="00" * 32
    )
    missing = await reads(store).read(work(gone, now))
    assert (missing.fingerprint, missing.problem) == (None, "the check's stored content is gone")
    without_before = await reads(store).read(work(now, gone))
    assert without_before.fingerprint == hashlib.sha256(b"now").hexdigest()
    assert (without_before.problem, without_before.diff) == (None, "")  # no diff against nothing


async def test_a_key_no_store_writes_is_refused_unread_and_a_failing_store_is_the_checks_outcome(
    reads, store, tmp_path
):
    secret = tmp_path / "secret.html"
    secret.write_text("<p>not yours</p>")
    forged = Artifact(
        artifact_id=uuid4(), key="../secret.html", content_type="text/html", size_bytes=16, sha256="00" * 32
    )
    refused = await reads(store).read(work(forged, None))
    assert refused.fingerprint is None
    assert "no stored artifact's key" in (refused.problem or "")

    class Failing(LocalArtifactStore):
        async def open(self, key: str):  # type: ignore[no-untyped-def]
            raise OSError("the disk is gone")

    page = await stored(store, b"<p>page</p>")
    failed = await reads(Failing(tmp_path / "x")).read(work(page, None))
    assert (failed.fingerprint, failed.problem) == (None, "the stored content could not be read: OSError")


async def test_a_page_that_makes_the_parser_quadratic_is_the_checks_problem_and_the_next_read_works(
    store, reads
):
    formatting = "".join(f"<b class=c{n}>" for n in range(2000))  # each block rebuilds all of them
    hostile = await stored(store, f"<html><body><p>{formatting}{'<p>x' * 3000}".encode())
    report = await reads(store).read(work(hostile, None))
    assert report.fingerprint is None
    assert "within limits" in (report.problem or "")
    page = await stored(store, b"<p>an ordinary page</p>")
    assert (await reads(store).read(work(page, None))).fingerprint is not None
