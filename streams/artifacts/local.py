"""Content-addressed artifacts in a local directory; writes are atomic (temp file, then rename)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from datetime import datetime
from pathlib import Path

from projections.artifacts import artifact_id_for, content_key, retention_expiry
from schemas.enums import RetentionClass
from schemas.records import Artifact


class LocalArtifactStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path_of(self, key: str) -> Path:
        return self.root / key

    async def put(self, body: bytes, content_type: str, retention: RetentionClass, now: datetime) -> Artifact:
        digest = hashlib.sha256(body).hexdigest()
        key = content_key(digest)
        await asyncio.to_thread(self._write, self.path_of(key), body)
        return Artifact(
            artifact_id=artifact_id_for(digest),
            key=key,
            content_type=content_type,
            size_bytes=len(body),
            sha256=digest,
            expires_at=retention_expiry(retention, now),
        )

    @staticmethod
    def _write(path: Path, body: bytes) -> None:
        if path.exists():
            return  # content-addressed: same key, same bytes
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as handle:
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(handle.name, path)
