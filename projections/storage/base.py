"""The storage contract: ordered byte keys, atomic batches, prefix scans."""

from collections.abc import Iterator, Mapping
from typing import Protocol

from schemas.errors import ScrapestreamError


class StoreError(ScrapestreamError):
    """The storage engine failed (disk full, closed, corrupt): an infrastructure failure."""


class KeyValueStore(Protocol):
    def get(self, key: bytes) -> bytes | None: ...

    def write(self, changes: Mapping[bytes, bytes | None]) -> None:
        """Apply every put (bytes) and delete (None) atomically."""

    def scan(self, start: bytes, stop: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Items with `start <= key < stop`, in key order."""

    def close(self) -> None: ...
