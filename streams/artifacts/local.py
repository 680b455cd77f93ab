"""Content-addressed artifacts in a local directory; writes are atomic (temp file, then rename).

Writes handed in while others are being written go to disk together, in one trip to a thread.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from projections.artifacts import describe
from schemas.enums import RetentionClass
from schemas.records import Artifact


class LocalArtifactStore:
    shared = False

    def __init__(self, root: Path) -> None:
        self.root = root
        self._pending: list[tuple[Path, bytes, asyncio.Future[None]]] = []
        self._writing: asyncio.Task[None] | None = None

    def path_of(self, key: str) -> Path:
        return self.root / key

    async def put(self, body: bytes, content_type: str, retention: RetentionClass, now: datetime) -> Artifact:
        artifact = describe(body, content_type, retention, now)
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((self.path_of(artifact.key), body, written))
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._write_pending())
        await written
        return artifact

    async def existing(self, keys: Sequence[str]) -> set[str]:
        return await asyncio.to_thread(lambda: {key for key in keys if self.path_of(key).is_file()})

    async def read(self, key: str) -> bytes | None:
        def load() -> bytes | None:
            try:
                return self.path_of(key).read_bytes()
            except FileNotFoundError:
                return None

        return await asyncio.to_thread(load)

    async def delete(self, keys: Sequence[str]) -> int:
        def remove() -> int:
            removed = 0
            for key in keys:
                try:
                    self.path_of(key).unlink()
                    removed += 1
                except FileNotFoundError:
                    pass
            return removed

        return await asyncio.to_thread(remove)

    async def close(self) -> None:
        if self._writing is not None:
            await asyncio.shield(self._writing)

    async def _write_pending(self) -> None:
        while self._pending:
            group, self._pending = self._pending, []
            outcomes = await asyncio.to_thread(_write_all, [(path, body) for path, body, _ in group])
            for (_, _, written), error in zip(group, outcomes, strict=True):
                if written.done():
                    continue
                if error is None:
                    written.set_result(None)
                else:
                    written.set_exception(error)


def _write_all(files: list[tuple[Path, bytes]]) -> list[OSError | None]:
    outcomes: list[OSError | None] = []
    for path, body in files:
        try:
            _write(path, body)
            outcomes.append(None)
        except OSError as exc:
            outcomes.append(exc)
    return outcomes


def _write(path: Path, body: bytes) -> None:
    if path.exists():
        return  # content-addressed: same key, same bytes
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with temporary.open("wb") as handle:
        handle.write(body)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
