"""RocksDB store (rocksdict, raw bytes); a batch is one atomic WriteBatch; engine errors are `StoreError`."""

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import cast

from rocksdict import AccessType, Options, Rdict, WriteBatch

from projections.storage.base import StoreError


class RocksStore:
    def __init__(self, path: Path, read_only: bool = False) -> None:
        """`read_only` opens a store another process is writing, as it was at this moment."""
        if not read_only:
            path.mkdir(parents=True, exist_ok=True)
        self._options = Options(raw_mode=True)
        self._options.create_if_missing(not read_only)
        access = AccessType.read_only() if read_only else AccessType.read_write()
        try:
            self._db = Rdict(str(path), self._options, access_type=access)
        except Exception as exc:  # rocksdict raises plain Exception
            raise StoreError(f"cannot open RocksDB at {path}: {exc}") from exc

    def get(self, key: bytes) -> bytes | None:
        try:
            return cast(bytes | None, self._db.get(key))
        except Exception as exc:
            raise StoreError(f"RocksDB read failed: {exc}") from exc

    def write(self, changes: Mapping[bytes, bytes | None]) -> None:
        batch = WriteBatch(raw_mode=True)
        for key, value in changes.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        try:
            self._db.write(batch)
        except Exception as exc:
            raise StoreError(f"RocksDB write failed: {exc}") from exc

    def scan(self, start: bytes, stop: bytes) -> Iterator[tuple[bytes, bytes]]:
        try:
            for key, value in self._db.items(from_key=start):
                raw_key = cast(bytes, key)
                if raw_key >= stop:
                    return
                yield raw_key, cast(bytes, value)
        except Exception as exc:
            raise StoreError(f"RocksDB scan failed: {exc}") from exc

    def close(self) -> None:
        self._db.close()
