"""The artifact store port: content-addressed bytes with their metadata, wherever they live.

Two implementations: `LocalArtifactStore` (a directory, the `dev` default) and
`S3ArtifactStore` (any S3-compatible service, shared by every worker).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from schemas.enums import RetentionClass
from schemas.errors import ScrapestreamError
from schemas.records import Artifact

CHUNK_BYTES = 256 * 1024


async def read_all(chunks: AsyncIterator[bytes] | None) -> bytes | None:
    """Every chunk joined: for what is known to be small (tests, a robots.txt)."""
    return None if chunks is None else b"".join([chunk async for chunk in chunks])


class ArtifactStoreError(ScrapestreamError):
    """The store cannot be used as configured; the message says which and why."""


@dataclass(frozen=True)
class StoredObject:
    key: str
    written_at: datetime  # its last write: storing the same bytes again renews it


class ArtifactStore(Protocol):
    shared: bool  # every worker reads the same objects (else only the worker that wrote them)

    async def put(self, body: bytes, content_type: str, retention: RetentionClass, now: datetime) -> Artifact:
        """Store `body` under its content address (the same bytes twice: one object); returns its record."""
        ...

    async def existing(self, keys: Sequence[str]) -> set[str]:
        """Which of `keys` are stored, checked together."""
        ...

    async def open(self, key: str) -> AsyncIterator[bytes] | None:
        """The stored bytes in chunks of at most `CHUNK_BYTES`, read as they are iterated (never
        whole into memory), or None when nothing is stored under `key`."""
        ...

    async def delete(self, keys: Sequence[str], written_before: datetime | None = None) -> list[str]:
        """Remove what is stored under `keys` (only objects last written before `written_before`, when
        given: one renewed since it was listed stays); returns the keys removed."""
        ...

    async def listing(self, after: str | None, limit: int) -> list[StoredObject]:
        """Up to `limit` stored objects in key order, from after the key `after`."""
        ...

    async def close(self) -> None: ...
