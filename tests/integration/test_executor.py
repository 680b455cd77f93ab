"""The executor against a loopback origin, with a sink that loses some records."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from uuid import uuid4

from aiokafka.errors import KafkaConnectionError

from schemas.codec import decode
from schemas.commands import RenewLease, ReportAttempt, StartAttempt
from schemas.enums import AttemptOutcome, FailureDisposition
from schemas.records import Request
from schemas.work import DueWork, LeaseRevoked
from streams.agents.executor import HttpExecutor
from streams.artifacts.local import LocalArtifactStore
from streams.clock import utc_now
from streams.fetch.http import FetchResult
from streams.jobtypes import Outcome
from streams.runtime.deadinput import DeadLetters
from streams.runtime.publisher import Outgoing
from streams.settings import load_settings


class LosingRenewals:
    """Acknowledges everything except lease renewals, which fail as if the broker were away."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def send_all(self, messages: Sequence[Outgoing], batch: object = None) -> list[Any]:
        records = [decode(message.value) for message in messages]
        if any(isinstance(record, RenewLease) for record in records):
            raise KafkaConnectionError("broker away")
        self.sent += records
        return [None] * len(records)


class SlowFetcher:
    """Takes longer than one renewal interval, once."""

    def __init__(self) -> None:
        self.calls = 0

    async def fetch(self, request: Request, *_: Any) -> FetchResult:
        self.calls += 1
        await asyncio.sleep(5.5)
        return FetchResult(outcome=AttemptOutcome.FETCHED, failure=None, http_status=200, body=b"ok")


class Raising:
    async def fetch(self, request: Request, *_: Any) -> FetchResult:
        raise RuntimeError("a bug in a fetcher")


def due(**overrides: Any) -> DueWork:
    now = utc_now()
    fields: dict[str, Any] = {
        "job_id": uuid4(),
        "attempt_number": 1,
        "lease_id": uuid4(),
        "lease_expires_at": now + timedelta(minutes=2),
        "renew_interval_ms": 5_000,
        "max_runtime_ms": 30_000,
        "job_type": "http.fetch",
        "request": Request(url="https://example.com/"),
        "policy_class": "STANDARD",
        "cache_mode": "BYPASS",
        "capture_mode": "RAW_BODY",
        "retention_class": "CACHE_7D",
        "transport_policy": "DIRECT_ONLY",
        "deadline_at": now + timedelta(hours=1),
        "start_by": now + timedelta(minutes=1),
    }
    return DueWork(**(fields | overrides))


class DueRecord:
    def __init__(self, work: DueWork | LeaseRevoked, timestamp: int | None = None) -> None:
        from schemas.codec import encode

        self.topic, self.partition, self.offset, self.key = "due", 0, 0, b"k"
        self.value = encode(work)
        self.timestamp = timestamp
        self.headers: tuple[tuple[str, bytes], ...] = ()  # as aiokafka's records: none here


def executor(tmp_path, fetcher, sink, **overrides: Any) -> HttpExecutor:
    settings = load_settings(data_dir=tmp_path, **overrides)
    dead = DeadLetters(settings, sink, Counter())
    return HttpExecutor(settings, fetcher, LocalArtifactStore(tmp_path / "artifacts"), sink, dead, utc_now)


async def test_a_failed_renewal_publish_does_not_throw_away_a_finished_fetch(tmp_path):
    sink, fetcher = LosingRenewals(), SlowFetcher()
    running = executor(tmp_path, fetcher, sink)
    await running.handle([DueRecord(due())])
    await running.close()
    kinds = [type(record).__name__ for record in sink.sent]
    assert kinds == ["StartAttempt", "ReportAttempt"]
    assert fetcher.calls == 1
    assert sink.sent[1].attempt.outcome is AttemptOutcome.FETCHED


async def test_an_exception_from_the_fetch_is_a_recorded_attempt_with_its_type(tmp_path):
    sink = LosingRenewals()
    running = executor(tmp_path, Raising(), sink)
    await running.handle([DueRecord(due())])
    await running.close()
    report = sink.sent[-1]
    assert isinstance(report, ReportAttempt)
    assert report.attempt.failure.code == "FETCH_FAILED"
    assert "RuntimeError" in report.attempt.failure.safe_message


async def test_work_past_its_start_window_is_not_started(tmp_path):
    sink, fetcher = LosingRenewals(), SlowFetcher()
    running = executor(tmp_path, fetcher, sink)
    await running.handle([DueRecord(due(start_by=utc_now() - timedelta(seconds=1)))])
    await running.close()
    assert sink.sent == []
    assert fetcher.calls == 0


async def test_a_backlog_of_work_past_its_start_window_is_taken_in_whole_batches_with_full_slots(tmp_path):
    running = executor(tmp_path, SlowFetcher(), LosingRenewals())
    now_ms = utc_now().timestamp() * 1000
    window_ms = running._settings.start_window_ms
    stale = [DueRecord(due(), timestamp=int(now_ms - window_ms - 1_000)) for _ in range(300)]
    fresh = [DueRecord(due(), timestamp=int(now_ms)) for _ in range(5)]
    assert running.batch_size([*stale, *fresh]) == 305
    assert running.batch_size(fresh * 10) == running.max_batch
    for _ in range(running.capacity()):  # every place taken by work waiting for its turn
        running._slots.start(asyncio.sleep(30))
    assert running.batch_size([*stale, *fresh]) == 301  # the stale ones, and one to wait on
    assert running.batch_size([*fresh, *stale]) == 1
    await running.close()


async def test_work_of_a_type_this_executor_does_not_run_is_reported_not_dropped(tmp_path):
    sink, fetcher = LosingRenewals(), SlowFetcher()
    running = executor(tmp_path, fetcher, sink)
    await running.handle([DueRecord(due(job_type="pdf.render"))])
    (report,) = sink.sent
    assert report.attempt.failure.code == "UNSUPPORTED_JOB_TYPE"
    assert report.attempt.outcome is AttemptOutcome.DENIED
    assert fetcher.calls == 0
    assert not isinstance(report, StartAttempt)


async def test_a_stopping_executor_gives_back_the_work_it_had_not_begun_and_only_that(tmp_path):
    sink, fetcher = LosingRenewals(), SlowFetcher()
    running = executor(tmp_path, fetcher, sink, host_concurrency=1, shutdown_grace_s=0.1)
    begun, waiting = due(), due()  # one host: the second waits for the first's place
    await running.handle([DueRecord(begun), DueRecord(waiting)])
    for _ in range(500):
        if fetcher.calls:
            break
        await asyncio.sleep(0.01)
    await running.close()
    (report,) = sink.sent
    assert isinstance(report, ReportAttempt)
    assert (report.job_id, report.attempt.lease_id) == (waiting.job_id, waiting.lease_id)
    assert report.attempt.outcome is AttemptOutcome.DENIED  # not charged: no request was made
    assert report.attempt.failure.code == "WORKER_STOPPED"
    assert report.attempt.failure.disposition is FailureDisposition.RETRYABLE
    assert fetcher.calls == 1


def revocation_of(work: DueWork) -> LeaseRevoked:
    return LeaseRevoked(
        job_id=work.job_id, attempt_number=work.attempt_number, lease_id=work.lease_id, reason="cancelled"
    )


async def test_a_revoked_lease_stops_its_running_attempt_without_a_report(tmp_path):
    sink, fetcher = LosingRenewals(), SlowFetcher()
    running = executor(tmp_path, fetcher, sink)
    work = due()
    await running.handle([DueRecord(work)])
    for _ in range(500):  # until the fetch runs
        if fetcher.calls:
            break
        await asyncio.sleep(0.01)
    assert fetcher.calls == 1
    await running.handle([DueRecord(revocation_of(work))])
    await running.settled()
    await running.close()
    assert running.revocations == 1
    assert not any(isinstance(record, ReportAttempt) for record in sink.sent)


async def test_work_revoked_in_the_batch_that_brought_it_is_never_started(tmp_path):
    sink, fetcher = LosingRenewals(), SlowFetcher()
    running = executor(tmp_path, fetcher, sink)
    work = due()
    await running.handle([DueRecord(work), DueRecord(revocation_of(work))])
    await running.settled()
    await running.close()
    assert fetcher.calls == 0
    assert sink.sent == []


class Malformed:
    name = "test.malformed"
    label = "Answers with a status that is no status"

    async def run(self, work: DueWork) -> Outcome:
        return Outcome(body=b"x", http_status="200")  # type: ignore[arg-type]


async def test_a_job_type_answer_of_the_wrong_shape_is_a_recorded_failure(tmp_path):
    sink = LosingRenewals()
    settings = load_settings(data_dir=tmp_path)
    running = HttpExecutor(
        settings,
        Raising(),
        LocalArtifactStore(tmp_path / "artifacts"),
        sink,
        DeadLetters(settings, sink, Counter()),
        utc_now,
        job_types={"test.malformed": Malformed()},
    )
    await running.handle([DueRecord(due(job_type="test.malformed"))])
    await running.close()
    (report,) = [record for record in sink.sent if isinstance(record, ReportAttempt)]
    assert report.attempt.failure.code == "JOB_TYPE_FAILED"
    assert "http_status" in report.attempt.failure.safe_message
