"""Both artifact stores keep the same contract: content-addressed puts, batch existence, reads, deletes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
import pytest_asyncio

from projections.artifacts import content_key
from schemas.codec import decode, encode
from schemas.enums import RetentionClass
from streams.artifacts.local import LocalArtifactStore
from streams.artifacts.port import ArtifactStore, ArtifactStoreError, read_all
from streams.artifacts.s3 import S3ArtifactStore

pytestmark = pytest.mark.asyncio
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def connect(s3, bucket: str) -> S3ArtifactStore:  # type: ignore[no-untyped-def]
    return S3ArtifactStore.connect(bucket, "artifacts/", s3.endpoint_url, "us-east-1", "testing", "testing")


@pytest_asyncio.fixture(params=["local", "s3"])
async def store(request, tmp_path, s3) -> AsyncIterator[ArtifactStore]:  # type: ignore[no-untyped-def]
    if request.param == "local":
        opened: ArtifactStore = LocalArtifactStore(tmp_path / "artifacts")
    else:
        remote = connect(s3, f"contract-{uuid4().hex[:12]}")
        await remote.ensure_bucket(create=True)
        opened = remote
    try:
        yield opened
    finally:
        await opened.close()


async def test_the_same_bytes_are_one_object_and_read_back_whole(store: ArtifactStore):
    first = await store.put(b"<html>one</html>", "text/html", RetentionClass.TRANSIENT_24H, NOW)
    again = await store.put(b"<html>one</html>", "text/html", RetentionClass.TRANSIENT_24H, NOW)
    assert first == again
    assert first.key == content_key(first.sha256, RetentionClass.TRANSIENT_24H)
    assert first.size_bytes == 16
    assert first.expires_at == datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert await read_all(await store.open(first.key)) == b"<html>one</html>"
    assert decode(encode(first)) == first  # whole: every field of the record, as events carry it


async def test_existence_is_checked_in_one_call_and_deletion_counts_what_was_there(store: ArtifactStore):
    kept = await store.put(b"kept", "text/plain", RetentionClass.CACHE_7D, NOW)
    gone = await store.put(b"gone", "text/plain", RetentionClass.CACHE_7D, NOW)
    never = content_key("0" * 64, RetentionClass.CACHE_7D)
    assert await store.existing([kept.key, gone.key, never]) == {kept.key, gone.key}
    assert await store.delete([gone.key, never]) == [gone.key]
    assert await store.existing([kept.key, gone.key]) == {kept.key}
    assert await read_all(await store.open(gone.key)) is None
    assert await read_all(await store.open(kept.key)) == b"kept"


async def test_an_archived_artifact_never_expires(store: ArtifactStore):
    archived = await store.put(b"keep", "text/plain", RetentionClass.REFERENCED_ARCHIVE, NOW)
    assert archived.expires_at is None


async def test_s3_objects_carry_their_type_and_metadata(s3):  # type: ignore[no-untyped-def]
    bucket = f"meta-{uuid4().hex[:12]}"
    store = connect(s3, bucket)
    await store.ensure_bucket(create=True)
    stored = await store.put(b"{}", "application/json", RetentionClass.CACHE_7D, NOW)
    await store.close()
    head = s3.client().head_object(Bucket=bucket, Key=f"artifacts/{stored.key}")
    assert head["ContentType"] == "application/json"
    assert head["Metadata"]["sha256"] == stored.sha256
    assert head["Metadata"]["captured-at"] == NOW.isoformat()
    assert head["Metadata"]["expires-at"] == "2026-12-07T12:00:00+00:00"
    assert stored.location == f"s3://{bucket}/artifacts/{stored.key}"


async def test_a_missing_bucket_is_a_clear_error_unless_it_may_be_created(s3):  # type: ignore[no-untyped-def]
    store = connect(s3, f"absent-{uuid4().hex[:12]}")
    with pytest.raises(ArtifactStoreError, match="SCRAPESTREAM_S3_CREATE_BUCKET=true"):
        await store.ensure_bucket(create=False)
    await store.close()


async def test_the_same_bytes_kept_for_different_spans_are_different_objects(store: ArtifactStore):
    short = await store.put(b"page", "text/html", RetentionClass.TRANSIENT_24H, NOW)
    long = await store.put(b"page", "text/html", RetentionClass.CACHE_7D, NOW)
    assert short.sha256 == long.sha256
    assert short.key != long.key
    assert short.artifact_id != long.artifact_id
    assert await store.existing([short.key, long.key]) == {short.key, long.key}


async def test_the_listing_pages_through_every_object_in_key_order(store: ArtifactStore):
    stored = [
        await store.put(f"body {n}".encode(), "text/plain", RetentionClass.CACHE_7D, NOW) for n in range(5)
    ]
    seen: list[str] = []
    after = None
    while page := await store.listing(after, 2):
        seen += [item.key for item in page]
        after = page[-1].key
    assert seen == sorted(artifact.key for artifact in stored)


async def test_a_conditional_delete_keeps_an_object_written_since(store: ArtifactStore):
    old = await store.put(b"old", "text/plain", RetentionClass.TRANSIENT_24H, NOW)
    (listed,) = [item for item in await store.listing(None, 100) if item.key == old.key]
    assert await store.delete([old.key], written_before=listed.written_at - timedelta(seconds=1)) == []
    assert await store.existing([old.key]) == {old.key}
    assert await store.delete([old.key], written_before=listed.written_at + timedelta(seconds=1)) == [old.key]
    assert await store.existing([old.key]) == set()
