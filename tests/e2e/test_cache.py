"""The response cache as users see it: repeated requests answered without reaching the origin."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import datetime, timedelta
from uuid import UUID

import httpx
import pytest
import pytest_asyncio
from aiohttp import web
from aiokafka import TopicPartition

from projections.artifacts import content_key
from schemas.enums import AttemptOutcome, CacheMode, CaptureMode, JobStatus, PolicyClass, RetentionClass
from schemas.events import JobAccepted
from schemas.records import Attempt
from streams.broker.compat import end_offsets
from tests.brokers import profile
from tests.e2e.conftest import System, read_topic, running_system, worker_settings
from tests.servers import loopback

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(broker, tmp_path_factory):  # type: ignore[no-untyped-def]
    settings = worker_settings(broker.bootstrap, tmp_path_factory.mktemp("cache"))
    async with running_system(settings) as running:
        yield running


async def job(system: System, url: str, key: str, **fields) -> tuple[UUID, Attempt]:  # type: ignore[no-untyped-def]
    job_id = await system.submit(url, idempotency_key=key, **fields)
    await system.completion(job_id)
    (attempt,) = await system.attempts_seen(job_id)
    return job_id, attempt


async def entry_seen(system: System, job_id: UUID) -> None:
    """Until the worker's cache table has read the entry the job's attempt made."""
    (accepted,) = [e for e in system.events.of_job(job_id) if isinstance(e, JobAccepted)]
    assert system.worker is not None
    assert system.worker.table is not None
    for _ in range(500):
        if system.worker.table.get(accepted.request_hash) is not None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the cache entry never reached the worker's table")


async def table_read_to_the_end(system: System) -> None:
    """Until the worker's cache table has read every entry written so far."""
    topic = system.settings.topic("cache")
    partitions = [TopicPartition(topic, partition) for partition in range(system.settings.partitions)]
    ends = await end_offsets(
        system.settings.kafka_access, partitions, profile(system.settings.kafka_bootstrap)
    )
    for _ in range(500):
        read = system.worker.table.offsets()
        if all(read.get((tp.topic, tp.partition), 0) >= end for tp, end in ends.items()):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the cache table stopped at {read}, the topic ends at {ends}")


async def test_the_same_url_again_completes_from_cache_without_a_request_unless_its_artifact_is_gone(
    system, origin
):
    url = origin.url("/page/cached")
    first, fetched = await job(system, url, "cached-1")
    assert fetched.outcome is AttemptOutcome.FETCHED
    await entry_seen(system, first)
    second, hit = await job(system, url, "cached-2")
    assert hit.outcome is AttemptOutcome.CACHE_HIT
    assert hit.from_cache
    assert hit.cost.actual == 0
    assert hit.bytes == 0
    assert hit.artifacts == fetched.artifacts
    assert (await system.completion(second)).status is JobStatus.SUCCEEDED
    assert origin.hits["/page/cached"] == 1
    (stored,) = fetched.artifacts
    (system.settings.data_dir / "artifacts" / stored.key).unlink()
    _, refetched = await job(system, url, "cached-3")
    assert refetched.outcome is AttemptOutcome.FETCHED
    assert origin.hits["/page/cached"] == 2


async def test_a_job_asking_to_keep_its_artifacts_longer_than_the_stored_ones_fetches_again(system, origin):
    url = origin.url("/page/retention")
    first, transient = await job(system, url, "retention-24h", retention_class=RetentionClass.TRANSIENT_24H)
    assert transient.artifacts[0].key.startswith("24h/")
    await entry_seen(system, first)
    _, archived = await job(
        system, url, "retention-archive", retention_class=RetentionClass.REFERENCED_ARCHIVE
    )
    assert archived.outcome is AttemptOutcome.FETCHED
    assert archived.artifacts[0].key.startswith("archive/")
    assert archived.artifacts[0].expires_at is None
    assert origin.hits["/page/retention"] == 2
    await table_read_to_the_end(system)
    _, shorter = await job(system, url, "retention-7d", retention_class=RetentionClass.CACHE_7D)
    assert shorter.outcome is AttemptOutcome.CACHE_HIT
    assert shorter.artifacts == archived.artifacts
    assert origin.hits["/page/retention"] == 2


async def test_bypass_fetches_even_with_a_valid_entry(system, origin):
    url = origin.url("/page/bypassed")
    first, _ = await job(system, url, "bypass-1")
    await entry_seen(system, first)
    _, bypassed = await job(system, url, "bypass-2", cache_mode=CacheMode.BYPASS)
    assert bypassed.outcome is AttemptOutcome.FETCHED
    assert origin.hits["/page/bypassed"] == 2


async def test_a_404_is_remembered_for_an_hour_and_ends_the_next_job_without_a_request(system, origin):
    url = origin.url("/gone/negative")
    first, missing = await job(system, url, "negative-1")
    assert missing.http_status == 404
    await entry_seen(system, first)
    second, cached = await job(system, url, "negative-2")
    assert cached.from_cache
    assert cached.http_status == 404
    assert cached.failure is not None
    assert cached.failure.code == "HTTP_404"
    assert (await system.completion(second)).status is JobStatus.DEAD_LETTER
    assert origin.hits["/gone/negative"] == 1


@pytest.mark.parametrize(("path", "hits"), [("/nostore/page", 2), ("/stale/page", 2)])
async def test_what_the_origin_forbids_caching_is_fetched_every_time(system, origin, path, hits):
    url = origin.url(path)
    first, _ = await job(system, url, f"{path}-1")
    await table_read_to_the_end(system)
    assert system.worker.table.get(fetched_hash(system, first)) is None
    _, again = await job(system, url, f"{path}-2")
    assert again.outcome is AttemptOutcome.FETCHED
    assert origin.hits[path] == hits


async def test_a_304_to_a_request_without_validators_is_a_typed_failure(system, origin):
    job_id, attempt = await job(system, origin.url("/notmodified/x"), "not-modified")
    assert attempt.failure is not None
    assert attempt.failure.code == "UNEXPECTED_NOT_MODIFIED"
    assert (await system.completion(job_id)).status is JobStatus.DEAD_LETTER


async def test_revalidate_asks_with_the_stored_etag_and_a_304_reuses_the_stored_artifact(system, origin):
    url = origin.url("/etag/page")
    first, fetched = await job(system, url, "etag-1")
    await entry_seen(system, first)
    second, revalidated = await job(system, url, "etag-2", cache_mode=CacheMode.REVALIDATE)
    assert origin.conditions["/etag/page"] == [None, '"v1"']
    assert revalidated.outcome is AttemptOutcome.NOT_MODIFIED
    assert revalidated.http_status == 304
    assert revalidated.artifacts == fetched.artifacts
    completion = await system.completion(second)
    assert completion.status is JobStatus.SUCCEEDED
    assert completion.artifacts == fetched.artifacts


async def test_a_304_whose_stored_artifact_is_gone_is_fetched_again_in_full(system, origin):
    url = origin.url("/etag/gone")
    first, fetched = await job(system, url, "etag-gone-1")
    await entry_seen(system, first)
    (stored,) = fetched.artifacts
    (system.settings.data_dir / "artifacts" / stored.key).unlink()
    _, refetched = await job(system, url, "etag-gone-2", cache_mode=CacheMode.REVALIDATE)
    assert origin.conditions["/etag/gone"] == [None, '"v1"', None]
    assert refetched.outcome is AttemptOutcome.FETCHED
    assert refetched.requests == 2  # the 304 and the whole page
    assert (system.settings.data_dir / "artifacts" / stored.key).exists()


async def test_an_origin_claiming_freshness_for_millennia_is_cached_for_seven_days_at_most(system, origin):
    url = origin.url("/forever/page")
    first, fetched = await job(system, url, "forever-1")
    assert (await system.completion(first)).status is JobStatus.SUCCEEDED
    await entry_seen(system, first)
    entry = system.worker.table.get(fetched_hash(system, first))
    assert entry is not None
    (stored,) = fetched.artifacts
    assert stored.expires_at is not None
    assert entry.expires_at == min(fetched.finished_at + timedelta(days=7), stored.expires_at)
    _, hit = await job(system, url, "forever-2")
    assert hit.outcome is AttemptOutcome.CACHE_HIT


def fetched_hash(system: System, job_id: UUID) -> str:
    (accepted,) = [e for e in system.events.of_job(job_id) if isinstance(e, JobAccepted)]
    return accepted.request_hash


async def test_a_no_cache_response_is_validated_with_the_origin_before_every_use(system, origin):
    url = origin.url("/nocache/validated")
    first, fetched = await job(system, url, "nocache-1")
    assert fetched.outcome is AttemptOutcome.FETCHED
    await entry_seen(system, first)
    _, validated = await job(system, url, "nocache-2")
    assert validated.outcome is AttemptOutcome.NOT_MODIFIED  # asked, not answered from cache
    assert validated.artifacts == fetched.artifacts
    assert origin.conditions["/nocache/validated"] == [None, '"n1"']


@pytest.mark.parametrize(
    "headers",
    [
        "Cache-Control=max-age=600&Vary=*",  # matches no later request
        "Cache-Control=max-age=60&Age=100",  # already older than its lifetime
        "Cache-Control=max-age=600,~s-maxage=0",  # a shared cache reads s-maxage
        "Cache-Control=private,~max-age=600",
    ],
)
async def test_a_response_rfc_9111_keeps_from_a_shared_cache_is_fetched_again(system, origin, headers):
    path = f"/headers/{headers}"
    url = origin.url(path)
    first, _ = await job(system, url, f"{headers}-1")
    await table_read_to_the_end(system)
    assert system.worker.table.get(fetched_hash(system, first)) is None
    _, again = await job(system, url, f"{headers}-2")
    assert again.outcome is AttemptOutcome.FETCHED
    assert origin.hits[path] == 2


async def test_a_cached_page_larger_than_a_jobs_policy_class_allows_does_not_answer_it(system, origin):
    url = origin.url("/bytes/3000000/large-cached")
    first, fetched = await job(system, url, "large-standard", policy_class=PolicyClass.STANDARD)
    assert fetched.outcome is AttemptOutcome.FETCHED
    await entry_seen(system, first)
    strict_job, strict = await job(system, url, "large-strict", policy_class=PolicyClass.STRICT)
    assert not strict.from_cache
    assert strict.failure is not None
    assert strict.failure.code == "BODY_TOO_LARGE"  # as it would be live: its cap is 2 MiB
    assert (await system.completion(strict_job)).status is JobStatus.DEAD_LETTER


async def test_a_cached_page_robots_txt_disallows_never_answers_a_job_that_obeys_robots(system):
    hits: dict[str, int] = {}

    async def site(request: web.Request) -> web.Response:
        hits[request.path] = hits.get(request.path, 0) + 1
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /private/\n")
        return web.Response(text="private page", headers={"Cache-Control": "max-age=600"})

    async with loopback(site) as port:
        url = f"http://127.0.0.1:{port}/private/page"
        first, fetched = await job(system, url, "robots-standard", policy_class=PolicyClass.STANDARD)
        assert fetched.outcome is AttemptOutcome.FETCHED
        await entry_seen(system, first)
        strict_job, strict = await job(system, url, "robots-strict", policy_class=PolicyClass.STRICT)
    assert strict.failure is not None
    assert strict.failure.code == "ROBOTS_DISALLOWED"
    assert not strict.from_cache
    assert (await system.completion(strict_job)).status is JobStatus.DEAD_LETTER
    assert hits["/private/page"] == 1


@pytest.mark.parametrize("path", ["/gone/right-after", "/page/right-after"])
async def test_a_job_submitted_right_after_a_completion_is_answered_by_that_completions_entry(
    system, origin, path
):
    url = origin.url(path)
    for n in range(3):
        job_id = await system.submit(url, idempotency_key=f"{path}-{n}")
        await system.completion(job_id)  # and at once the next: no wait for the cache table
    assert origin.hits[path] == 1


async def test_an_answer_from_the_cache_says_so_and_a_redrive_asks_the_origin_again(system, origin):
    url = origin.url("/missing/redriven")
    first, _ = await job(system, url, "missing-1")
    await entry_seen(system, first)
    second, cached = await job(system, url, "missing-2")
    assert cached.from_cache
    assert cached.cache_entry_job_id == first
    completion = await system.completion(second)
    assert (completion.status, completion.from_cache) == (JobStatus.DEAD_LETTER, True)
    assert completion.cached_at is not None
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        (shown,) = (await http.get(f"/jobs/{second}")).json()["attempts"]
        assert shown["from_cache"] is True
        assert shown["cache_age_ms"] >= 0
        assert shown["cache_entry_job_id"] == str(first)
        events = (await http.get(f"/jobs/{second}/events")).json()["items"]
        recorded = next(event for event in events if event["type"] == "AttemptRecorded")
        assert recorded["data"]["attempt"]["from_cache"] is True
        origin.mended.set()
        redriven = await http.post(f"/jobs/{second}/redrive", json={"reason": "the page is there now"})
        assert redriven.status_code == 200, redriven.text
    await system.events.wait_for(lambda _: "JobSucceeded" in system.event_kinds(second))
    attempts = system.attempts(second)
    assert [a.from_cache for a in attempts] == [True, False]
    assert origin.hits["/missing/redriven"] == 2


async def test_a_metadata_only_answer_is_cached_under_its_own_key_and_never_stands_in_for_a_page(
    system, origin
):
    url = origin.url("/page/metadata")
    first, fetched = await job(system, url, "metadata-1", capture_mode=CaptureMode.METADATA_ONLY)
    assert (fetched.outcome, fetched.artifacts) == (AttemptOutcome.FETCHED, ())
    _, hit = await job(system, url, "metadata-2", capture_mode=CaptureMode.METADATA_ONLY)
    assert (hit.outcome, hit.from_cache, hit.cache_entry_job_id) == (
        AttemptOutcome.CACHE_HIT,
        True,
        first,
    )
    assert hit.artifacts == ()
    assert origin.hits["/page/metadata"] == 1
    page, stored = await job(system, url, "metadata-then-page")  # a page is fetched: metadata is no page
    assert stored.outcome is AttemptOutcome.FETCHED
    assert len(stored.artifacts) == 1
    assert origin.hits["/page/metadata"] == 2
    assert (await system.completion(page)).status is JobStatus.SUCCEEDED


async def test_a_304_whose_page_is_gone_never_takes_the_attempt_past_its_requests(system, origin):
    url = origin.url("/hop/4/etag/deep")  # five redirects, then the page: the six requests STANDARD allows
    first, fetched = await job(system, url, "deep-1")
    assert (fetched.outcome, fetched.requests) == (AttemptOutcome.FETCHED, 6)
    await entry_seen(system, first)
    (stored,) = fetched.artifacts
    (system.settings.data_dir / "artifacts" / stored.key).unlink()
    again = await system.submit(url, idempotency_key="deep-2", cache_mode=CacheMode.REVALIDATE)
    assert (await system.completion(again)).status is JobStatus.SUCCEEDED
    await system.events.wait_for(lambda _: len(system.attempts(again)) == 2)
    spent, refetched = system.attempts(again)
    assert (spent.failure.code, spent.requests, spent.http_status) == ("REQUEST_BUDGET_SPENT", 6, None)
    assert (refetched.outcome, refetched.requests) == (AttemptOutcome.FETCHED, 6)
    # The stale entry was removed when found: the retry asked for the whole page, unconditionally.
    assert origin.conditions["/etag/deep"] == [None, '"v1"', None]


async def test_an_entry_whose_artifact_is_gone_is_removed_when_found(system, origin):
    url = origin.url("/once/stale-pointer")
    first, fetched = await job(system, url, "stale-pointer-1")
    await entry_seen(system, first)
    (accepted,) = [e for e in system.events.of_job(first) if isinstance(e, JobAccepted)]
    (stored,) = fetched.artifacts
    (system.settings.data_dir / "artifacts" / stored.key).unlink()
    second, failed = await job(system, url, "stale-pointer-2", attempt_limit=1)
    assert (failed.from_cache, failed.http_status) == (False, 503)
    assert (await system.completion(second)).status is JobStatus.DEAD_LETTER
    assert system.worker.table.get(accepted.request_hash) is None
    records = await read_topic(system.settings.kafka_bootstrap, system.settings.topic("cache"), 2)
    written = [r for r in records if r.key == accepted.request_hash.encode()]
    assert [r.value is None for r in written] == [False, True]  # the entry, then its tombstone


async def test_the_cache_says_which_entry_answers_a_url_now_and_as_of_a_time(system, origin):
    url = origin.url("/page/cache-as-of")
    writer, _ = await job(system, url, "cache-as-of")
    await entry_seen(system, writer)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        now = (await http.get("/cache", params={"url": url})).json()
        assert now["answered_from_cache"] is True
        assert now["entry"]["job_id"] == str(writer)
        stored_at = datetime.fromisoformat(now["entry"]["stored_at"])
        then = (await http.get("/cache", params={"url": url, "as_of": stored_at.isoformat()})).json()
        assert then["answered_from_cache"] is True
        late = stored_at + timedelta(days=30)  # past any entry's lifetime, but in the future: refused
        answer = await http.get("/cache", params={"url": url, "as_of": late.isoformat()})
        assert answer.status_code == 422
        assert "in the future" in answer.json()["message"]
        before = stored_at - timedelta(seconds=1)
        answer = await http.get("/cache", params={"url": url, "as_of": before.isoformat()})
        assert answer.status_code == 422
        assert "keeps only the latest entry of each request" in answer.json()["message"]
        assert f"stored at {stored_at:%Y-%m-%dT%H:%M:%S}" in answer.json()["message"]
        never = (await http.get("/cache", params={"url": origin.url("/page/never-fetched")})).json()
        assert never["answered_from_cache"] is False
        assert never["entry"] is None
        assert (await http.get("/cache", params={"url": "ftp://example.com/"})).status_code == 400


async def test_a_cache_entry_points_only_at_content_addressed_objects_stored_before_it(system, origin):
    url = origin.url("/page/captured-first")
    first, fetched = await job(system, url, "captured-first")
    await entry_seen(system, first)
    (accepted,) = [e for e in system.events.of_job(first) if isinstance(e, JobAccepted)]
    assert system.worker is not None
    assert system.worker.table is not None
    entry = system.worker.table.get(accepted.request_hash)
    assert entry is not None
    assert entry.artifacts == fetched.artifacts
    for artifact in entry.artifacts:
        path = system.settings.data_dir / "artifacts" / artifact.key
        assert artifact.key == content_key(artifact.sha256, RetentionClass.CACHE_7D)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == artifact.sha256  # there, whole
