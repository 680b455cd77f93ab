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


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with `prefix` (whatever bytes follow it)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return b"\xff" * (len(prefix) + 1)
    return trimmed[:-1] + bytes([trimmed[-1] + 1])
