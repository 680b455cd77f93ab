"""Artifacts in an S3-compatible bucket through boto3 (its calls run in threads).

Objects are content-addressed under the configured prefix and carry their content type and
metadata (size, capture time, expiry), so the bucket alone says what each object is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import boto3
import msgspec
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from projections.artifacts import describe
from schemas.enums import RetentionClass
from schemas.records import Artifact
from streams.artifacts.port import CHUNK_BYTES, ArtifactStoreError, StoredObject

log = logging.getLogger(__name__)
DELETE_BATCH = 1_000  # S3's DeleteObjects limit
CHECKS_AT_ONCE = 16
MISSING = {"404", "NoSuchKey", "NotFound"}


class S3ArtifactStore:
    shared = True

    def __init__(self, client: Any, bucket: str, prefix: str) -> None:
        self._client = client
        self._bucket = bucket
        self._prefix = prefix
        self._checks = asyncio.Semaphore(CHECKS_AT_ONCE)

    @classmethod
    def connect(
        cls,
        bucket: str,
        prefix: str,
        endpoint_url: str | None,
        region: str,
        access_key_id: str | None,
        secret_access_key: str | None,
    ) -> S3ArtifactStore:
        client = boto3.client(
            "s3",
            endpoint_url=endpoint_url,
            region_name=region,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            config=Config(retries={"max_attempts": 3, "mode": "standard"}, max_pool_connections=32),
        )
        return cls(client, bucket, prefix)

    def _key(self, key: str) -> str:
        return f"{self._prefix}{key}"

    async def ensure_bucket(self, create: bool) -> None:
        """Checks the bucket answers; with `create` (dev and tests) makes it when it is missing."""
        try:
            await asyncio.to_thread(self._client.head_bucket, Bucket=self._bucket)
            return
        except ClientError as exc:
            if not create and _code(exc) in MISSING:
                raise ArtifactStoreError(
                    f"S3 bucket {self._bucket!r} (SCRAPESTREAM_S3_BUCKET) does not exist: create it, or set "
                    "SCRAPESTREAM_S3_CREATE_BUCKET=true to have the worker create it"
                ) from exc
            if _code(exc) not in MISSING:
                raise ArtifactStoreError(f"S3 bucket {self._bucket!r} cannot be used: {exc}") from exc
        except BotoCoreError as exc:
            raise ArtifactStoreError(f"S3 bucket {self._bucket!r} cannot be reached: {exc}") from exc
        try:
            await asyncio.to_thread(self._client.create_bucket, Bucket=self._bucket)
        except (ClientError, BotoCoreError) as exc:
            raise ArtifactStoreError(f"S3 bucket {self._bucket!r} cannot be created: {exc}") from exc

    async def put(self, body: bytes, content_type: str, retention: RetentionClass, now: datetime) -> Artifact:
        artifact = describe(body, content_type, retention, now)
        metadata = {
            "sha256": artifact.sha256,
            "size": str(artifact.size_bytes),
            "captured-at": now.isoformat(),
            "expires-at": "" if artifact.expires_at is None else artifact.expires_at.isoformat(),
        }
        await asyncio.to_thread(
            self._client.put_object,
            Bucket=self._bucket,
            Key=self._key(artifact.key),
            Body=body,
            ContentType=content_type,
            Metadata=metadata,
        )
        return msgspec.structs.replace(artifact, location=f"s3://{self._bucket}/{self._key(artifact.key)}")

    async def existing(self, keys: Sequence[str]) -> set[str]:
        found = await asyncio.gather(*(self._exists(key) for key in keys))
        return {key for key, present in zip(keys, found, strict=True) if present}

    async def _exists(self, key: str) -> bool:
        async with self._checks:
            try:
                await asyncio.to_thread(self._client.head_object, Bucket=self._bucket, Key=self._key(key))
            except ClientError as exc:
                if _code(exc) in MISSING:
                    return False
                raise
        return True

    async def open(self, key: str) -> AsyncIterator[bytes] | None:
        def fetch() -> Any:
            try:
                return self._client.get_object(Bucket=self._bucket, Key=self._key(key))["Body"]
            except ClientError as exc:
                if _code(exc) in MISSING:
                    return None
                raise

        body = await asyncio.to_thread(fetch)
        return None if body is None else _chunks(body)

    async def delete(self, keys: Sequence[str], written_before: datetime | None = None) -> list[str]:
        if written_before is None:
            present = await self.existing(keys)
        else:
            written = await asyncio.gather(*(self._written_at(key) for key in keys))
            present = {
                key for key, at in zip(keys, written, strict=True) if at is not None and at < written_before
            }
        ordered = sorted(present)
        failed: set[str] = set()
        for start in range(0, len(ordered), DELETE_BATCH):
            batch = [{"Key": self._key(key)} for key in ordered[start : start + DELETE_BATCH]]
            answer = await asyncio.to_thread(
                self._client.delete_objects, Bucket=self._bucket, Delete={"Objects": batch, "Quiet": True}
            )
            for error in answer.get("Errors", []):
                log.warning("could not delete %s: %s", error.get("Key"), error.get("Message"))
                failed.add(error.get("Key", ""))
        return [key for key in ordered if self._key(key) not in failed]

    async def _written_at(self, key: str) -> datetime | None:
        async with self._checks:
            try:
                head = await asyncio.to_thread(
                    self._client.head_object, Bucket=self._bucket, Key=self._key(key)
                )
            except ClientError as exc:
                if _code(exc) in MISSING:
                    return None
                raise
        return _utc(head["LastModified"])

    async def listing(self, after: str | None, limit: int) -> list[StoredObject]:
        def page() -> list[StoredObject]:
            answer = self._client.list_objects_v2(
                Bucket=self._bucket,
                Prefix=self._prefix,
                StartAfter=self._key(after or ""),
                MaxKeys=min(limit, 1_000),
            )
            # Foreign objects under the prefix are listed too, so a page always moves on; none expires.
            return [
                StoredObject(str(item["Key"])[len(self._prefix) :], _utc(item["LastModified"]))
                for item in answer.get("Contents", ())
            ]

        return await asyncio.to_thread(page)

    async def close(self) -> None:
        await asyncio.to_thread(self._client.close)


async def _chunks(body: Any) -> AsyncIterator[bytes]:
    try:
        while chunk := await asyncio.to_thread(body.read, CHUNK_BYTES):
            yield chunk
    finally:
        body.close()


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
