"""Content-addressed artifacts in a local directory; writes are atomic (temp file, then rename).

A file's modification time is its last write, which storing the same bytes again renews.

Writes handed in while others are being written go to disk together, in one trip to a thread.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from projections.artifacts import describe, is_content_key
from schemas.enums import RetentionClass
from schemas.records import Artifact
from streams.artifacts.port import CHUNK_BYTES, StoredObject


class LocalArtifactStore:
    shared = False

    def __init__(self, root: Path) -> None:
        self.root = root
        self._pending: list[tuple[Path, bytes, float, asyncio.Future[None]]] = []
        self._writing: asyncio.Task[None] | None = None

    def path_of(self, key: str) -> Path:
        return self.root / key

    async def put(self, body: bytes, content_type: str, retention: RetentionClass, now: datetime) -> Artifact:
        artifact = describe(body, content_type, retention, now)
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((self.path_of(artifact.key), body, now.timestamp(), written))
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._write_pending())
        await written
        return artifact

    async def existing(self, keys: Sequence[str]) -> set[str]:
        return await asyncio.to_thread(lambda: {key for key in keys if self.path_of(key).is_file()})

    async def open(self, key: str) -> AsyncIterator[bytes] | None:
        try:
            handle = await asyncio.to_thread(self.path_of(key).open, "rb")
        except (FileNotFoundError, IsADirectoryError):
            return None
        return _chunks(handle)

    async def delete(self, keys: Sequence[str], written_before: datetime | None = None) -> list[str]:
        before = None if written_before is None else written_before.timestamp()

        def remove() -> list[str]:
            removed = []
            for key in keys:
                path = self.path_of(key)
                try:
                    if before is None or path.stat().st_mtime < before:
                        path.unlink()
                        removed.append(key)
                except FileNotFoundError:
                    pass
            return removed

        return await asyncio.to_thread(remove)

    async def listing(self, after: str | None, limit: int) -> list[StoredObject]:
        def scan() -> list[StoredObject]:
            found = []
            for key in _keys_after(self.root, after or ""):
                try:
                    modified = self.path_of(key).stat().st_mtime
                except FileNotFoundError:
                    continue
                found.append(StoredObject(key, datetime.fromtimestamp(modified, UTC)))
                if len(found) >= limit:
                    break
            return found

        return await asyncio.to_thread(scan)

    async def close(self) -> None:
        if self._writing is not None:
            await asyncio.shield(self._writing)

    async def _write_pending(self) -> None:
        while self._pending:
            group, self._pending = self._pending, []
            files = [(path, body, written_at) for path, body, written_at, _ in group]
            outcomes = await asyncio.to_thread(_write_all, files)
            for (_, _, _, written), error in zip(group, outcomes, strict=True):
                if written.done():
                    continue
                if error is None:
                    written.set_result(None)
                else:
                    written.set_exception(error)


async def _chunks(handle: BinaryIO) -> AsyncIterator[bytes]:
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK_BYTES):
            yield chunk
    finally:
        handle.close()


def _write_all(files: list[tuple[Path, bytes, float]]) -> list[OSError | None]:
    outcomes: list[OSError | None] = []
    for path, body, written_at in files:
        try:
            _write(path, body, written_at)
            outcomes.append(None)
        except OSError as exc:
            outcomes.append(exc)
    return outcomes


def _write(path: Path, body: bytes, written_at: float) -> None:
    try:
        if path.stat().st_mtime < written_at:
            os.utime(path, (written_at, written_at))  # content-addressed: same bytes, renewed
        return
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with temporary.open("wb") as handle:
        handle.write(body)
        handle.flush()
        os.fsync(handle.fileno())
    os.utime(temporary, (written_at, written_at))
    os.replace(temporary, path)


def _keys_after(root: Path, after: str) -> Iterator[str]:
    """Stored keys in order, from after `after`; anything that is not an artifact is skipped."""
    for directory, subdirectories, files in os.walk(root):
        subdirectories.sort()
        relative = Path(directory).relative_to(root).as_posix()
        prefix = "" if relative == "." else f"{relative}/"
        if prefix and after and not after.startswith(prefix) and prefix < after[: len(prefix)]:
            subdirectories.clear()  # everything below sorts before `after`
            continue
        for name in sorted(files):
            key = prefix + name
            if key > after and is_content_key(key):
                yield key
