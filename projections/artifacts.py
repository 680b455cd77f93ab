"""Artifact naming and retention: content-addressed keys per retention class, and their expiry.

The key names the retention class, so one object is only ever shared by artifacts kept equally
long: storing the same bytes again renews the object, and its expiry is its last write plus the
class's span, never earlier than any artifact record that points at it.
"""

import hashlib
import re
from datetime import datetime, timedelta
from enum import Enum
from uuid import UUID, uuid5

from schemas.enums import RetentionClass
from schemas.records import Artifact

ARTIFACT_NAMESPACE = UUID("0d3b7e55-8a51-5c59-bf0a-5a3f0e6c2d21")
PNG = "image/png"  # a rendered page's screenshot, and a visual change's difference
RETENTION: dict[RetentionClass, timedelta | None] = {
    RetentionClass.TRANSIENT_24H: timedelta(hours=24),
    RetentionClass.CACHE_7D: timedelta(days=7),
    RetentionClass.REFERENCED_ARCHIVE: None,
}
CLASS_DIRECTORY = {
    RetentionClass.TRANSIENT_24H: "24h",
    RetentionClass.CACHE_7D: "7d",
    RetentionClass.REFERENCED_ARCHIVE: "archive",
}
CLASS_OF_DIRECTORY = {directory: retention for retention, directory in CLASS_DIRECTORY.items()}
KEY_PATTERN = re.compile(r"^(24h|7d|archive)/sha256/([0-9a-f]{2})/([0-9a-f]{64})$")


def content_key(sha256_hex: str, retention: RetentionClass) -> str:
    return f"{CLASS_DIRECTORY[retention]}/sha256/{sha256_hex[:2]}/{sha256_hex}"


def is_content_key(key: str) -> bool:
    found = KEY_PATTERN.match(key)
    return found is not None and found.group(3).startswith(found.group(2))


def artifact_id_for(key: str) -> UUID:
    return uuid5(ARTIFACT_NAMESPACE, key)


def retention_expiry(retention_class: RetentionClass, now: datetime) -> datetime | None:
    kept_for = RETENTION[retention_class]
    return None if kept_for is None else now + kept_for


def retention_of(key: str) -> RetentionClass | None:
    """The retention class a content key was stored under; None for a foreign key."""
    found = KEY_PATTERN.match(key)
    return None if found is None else CLASS_OF_DIRECTORY[found.group(1)]


def kept_at_least_as_long(key: str, retention_class: RetentionClass) -> bool:
    """Whether an object under `key` is kept at least as long as `retention_class` asks (foreign keys
    are never expired by scrapestream)."""
    stored_as = retention_of(key)
    return stored_as is None or _span(stored_as) >= _span(retention_class)


def _span(retention_class: RetentionClass) -> timedelta:
    kept_for = RETENTION[retention_class]
    return timedelta.max if kept_for is None else kept_for


def expired_if_written_before(key: str, now: datetime) -> datetime | None:
    """An object stored under `key` has expired by `now` if last written before this moment; None for
    pinned (archived) or foreign keys, which never expire."""
    stored_as = retention_of(key)
    kept_for = None if stored_as is None else RETENTION[stored_as]
    return None if kept_for is None else now - kept_for


class Pointers(Enum):
    """What points at a stored object: a job's artifact record or a cache entry."""

    LIVE = "live"  # at least one that has not expired
    LAPSED = "lapsed"  # only expired ones
    NONE = "none"  # none: the object is an orphan


def reference_key(artifact_key: str, job_id: UUID) -> bytes:
    """The key of a job's reference to an object on the references topic."""
    return f"{artifact_key}\x00{job_id}".encode()


def removable_if_written_before(
    key: str, pointers: Pointers, now: datetime, orphan_grace: timedelta
) -> datetime | None:
    """An object stored under `key` may be deleted at `now` if last written before this moment; None
    while anything live points at it, and for keys scrapestream did not write.

    The grace keeps an object just stored whose reference is still on its way; a lapsed object of a
    class that expires is also kept for its class's span since its last write."""
    if not is_content_key(key) or pointers is Pointers.LIVE:
        return None
    orphaned_before = now - orphan_grace
    class_cutoff = expired_if_written_before(key, now)
    if pointers is Pointers.LAPSED and class_cutoff is not None:
        return min(orphaned_before, class_cutoff)
    return orphaned_before


def describe(body: bytes, content_type: str, retention: RetentionClass, now: datetime) -> Artifact:
    """The record of `body` stored now: its content address, size and expiry."""
    digest = hashlib.sha256(body).hexdigest()
    key = content_key(digest, retention)
    expires_at = retention_expiry(retention, now)
    return Artifact(
        artifact_id=artifact_id_for(key),
        key=key,
        content_type=content_type,
        size_bytes=len(body),
        sha256=digest,
        expires_at=expires_at,
        location=None,  # the store says where, when it has a place of its own (s3://…)
    )
