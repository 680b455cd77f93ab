"""RocksDB store (rocksdict, raw bytes); a batch is one atomic WriteBatch."""

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import cast

from rocksdict import Options, Rdict, WriteBatch


class RocksStore:
    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self._options = Options(raw_mode=True)
        self._options.create_if_missing(True)
        self._db = Rdict(str(path), self._options)

    def get(self, key: bytes) -> bytes | None:
        return cast(bytes | None, self._db.get(key))

    def write(self, changes: Mapping[bytes, bytes | None]) -> None:
        batch = WriteBatch(raw_mode=True)
        for key, value in changes.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        self._db.write(batch)

    def scan(self, start: bytes, stop: bytes) -> Iterator[tuple[bytes, bytes]]:
        for key, value in self._db.items(from_key=start):
            raw_key = cast(bytes, key)
            if raw_key >= stop:
                return
            yield raw_key, cast(bytes, value)

    def close(self) -> None:
        self._db.close()
