"""Artifact naming and retention: content-addressed keys and expiry per retention class."""

import hashlib
from datetime import datetime, timedelta
from uuid import UUID, uuid5

from schemas.enums import RetentionClass
from schemas.records import Artifact
from schemas.types import build, to_utc_millis

ARTIFACT_NAMESPACE = UUID("0d3b7e55-8a51-5c59-bf0a-5a3f0e6c2d21")
RETENTION: dict[RetentionClass, timedelta | None] = {
    RetentionClass.TRANSIENT_24H: timedelta(hours=24),
    RetentionClass.CACHE_7D: timedelta(days=7),
    RetentionClass.REFERENCED_ARCHIVE: None,
}


def content_key(sha256_hex: str) -> str:
    return f"sha256/{sha256_hex[:2]}/{sha256_hex}"


def artifact_id_for(sha256_hex: str) -> UUID:
    return uuid5(ARTIFACT_NAMESPACE, sha256_hex)


def retention_expiry(retention_class: RetentionClass, now: datetime) -> datetime | None:
    kept_for = RETENTION[retention_class]
    return None if kept_for is None else now + kept_for


def describe(body: bytes, content_type: str, retention: RetentionClass, now: datetime) -> Artifact:
    """The record of `body` stored now: its content address, size and expiry."""
    digest = hashlib.sha256(body).hexdigest()
    expires_at = retention_expiry(retention, now)
    fields = {
        "artifact_id": artifact_id_for(digest),
        "key": content_key(digest),
        "content_type": content_type,
        "size_bytes": len(body),
        "sha256": digest,
        "expires_at": None if expires_at is None else to_utc_millis(expires_at),
    }
    return build(Artifact, fields)
