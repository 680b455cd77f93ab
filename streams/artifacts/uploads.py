"""Where an outside executor puts a result too large for a record: a signed, expiring URL on the
worker that owns the job, handed out with the due work.

The object key is the job type's to choose (`output_key(work)`, else `default_output_key`); the
URL signs the job, lease, key and expiry, so it writes that one object once, until the lease
ends. The executor then reports the key as its attempt's `result_key`; the worker reads the
object back (bounded), checks it like any result and removes it. A URL is used once: a claim made
when its upload starts stays until the URL expires, then `sweep` removes it with any upload
nobody read (an executor that died after uploading, a report refused as stale).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from urllib.parse import quote, urlencode
from uuid import UUID

import msgspec

from schemas.work import DueWork
from streams.clock import utc_now
from streams.runtime.periodic import every

UPLOADS_PATH = "/uploads"
KEY_PATTERN = re.compile(r"^[A-Za-z0-9._/-]{1,256}$")
CLAIM = ".claim"
SWEEP_INTERVAL_S = 300.0


def default_output_key(work: DueWork) -> str:
    return f"{work.job_type}/{work.job_id}/{work.attempt_number}-{work.lease_id}"


def is_plain_key(key: str) -> bool:
    """A relative object key that names nothing outside the store (no `..` segment, no root)."""
    return KEY_PATTERN.fullmatch(key) is not None and ".." not in key.split("/") and not key.startswith("/")


class UploadRefusedError(ValueError):
    """An upload or a reported key this worker will not take; the message says why."""


class Uploads:
    def __init__(
        self,
        types: Mapping[str, object],  # remote job types by name (an optional `output_key` hook)
        directory: Path,
        key: bytes | None,
        base_url: Callable[[], str],
        max_bytes: int,
    ) -> None:
        self._types = types
        self._directory = directory
        self._key = key or secrets.token_bytes(32)  # from the peer secret: every worker verifies it
        self._base_url = base_url
        self.max_bytes = max_bytes

    def output_key(self, work: DueWork) -> str:
        """The object key the job's type chooses for this attempt's result."""
        hook = getattr(self._types.get(work.job_type), "output_key", None)
        key = str(hook(work)) if callable(hook) else default_output_key(work)
        if not is_plain_key(key):
            raise UploadRefusedError(f"{work.job_type}'s output key {key[:80]!r} is not a plain relative key")
        return key

    def handed_out(self, work: DueWork) -> DueWork:
        """The due work with its upload URL and key, for a remotely run type (others as they are)."""
        if work.job_type not in self._types:
            return work
        key = self.output_key(work)
        expires = int(work.lease_expires_at.timestamp()) + 3600  # a started run's lease runs on
        query = {
            "key": key,
            "expires": expires,
            "signature": self._sign(work.job_id, work.lease_id, key, expires),
        }
        path = f"{UPLOADS_PATH}/{work.job_id}/{work.lease_id}"
        url = f"{self._base_url()}{path}?{urlencode(query, quote_via=quote)}"
        return msgspec.structs.replace(work, upload_url=url, upload_key=key)

    def refusal(
        self, job_id: UUID, lease_id: UUID, key: str, expires: str, signature: str, now: datetime
    ) -> str | None:
        """Why an upload request is not one this worker handed out, or None."""
        if not expires.isdigit() or int(expires) < now.timestamp():
            return "the upload URL has expired"
        expected = self._sign(job_id, lease_id, key, int(expires))
        if not hmac.compare_digest(expected, signature):
            return "the upload URL's signature does not match"
        return None

    def staged(self, job_id: UUID, lease_id: UUID, key: str) -> Path:
        """Where an upload signed for this job, lease and key is kept until its report reads it."""
        name = hashlib.sha256(f"{job_id}\n{lease_id}\n{key}".encode()).hexdigest()
        return self._directory / name

    def claimed(self, target: Path, expires: int) -> bool:
        """Claims the URL whose upload goes to `target` for one use; False when it was used before.
        The claim records when the URL expires, for `sweep`."""
        self._directory.mkdir(parents=True, exist_ok=True)
        try:
            with target.with_name(f"{target.name}{CLAIM}").open("x") as claim:
                claim.write(str(expires))
        except FileExistsError:
            return False
        return True

    def unclaimed(self, target: Path) -> None:
        """An upload that failed before it was stored leaves its URL usable again."""
        target.with_name(f"{target.name}{CLAIM}").unlink(missing_ok=True)

    async def run(self) -> None:
        """Sweeps every `SWEEP_INTERVAL_S`, off the event loop."""
        await every(SWEEP_INTERVAL_S, self._swept, "an upload sweep")

    async def _swept(self) -> None:
        await asyncio.to_thread(self.sweep, utc_now())

    def sweep(self, now: datetime) -> int:
        """Removes every claim whose URL has expired, with its upload if nobody read it (or the part
        of one a stopped worker left); how many."""
        removed = 0
        for claim in self._directory.glob(f"*{CLAIM}"):
            try:
                expires = int(claim.read_text() or "0")
            except (OSError, ValueError):
                expires = 0
            if expires >= now.timestamp():
                continue
            staged = claim.with_name(claim.name.removesuffix(CLAIM))
            for left in (staged, *self._directory.glob(f"{staged.name}.*.part")):
                left.unlink(missing_ok=True)
            claim.unlink(missing_ok=True)
            removed += 1
        return removed

    def taken(self, job_id: UUID, lease_id: UUID, key: str) -> bytes:
        """The result uploaded under `key` for this job and lease (only a signed upload put one
        there), removed once read."""
        path = self.staged(job_id, lease_id, key)
        try:
            body = path.read_bytes()
        except FileNotFoundError as exc:
            raise UploadRefusedError(f"nothing was uploaded for this attempt under {key[:80]!r}") from exc
        path.unlink(missing_ok=True)
        return body

    def _sign(self, job_id: UUID, lease_id: UUID, key: str, expires: int) -> str:
        message = f"scrapestream-upload/1\n{job_id}\n{lease_id}\n{key}\n{expires}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")
