"""Uploads nobody read (an executor that died after uploading, a report refused as stale) and the
claims of used URLs leave the worker's disk once their URLs expire."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from streams.artifacts.uploads import Uploads

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def test_a_url_is_claimed_once_and_swept_with_its_unread_upload_once_it_expires(tmp_path):
    uploads = Uploads({}, tmp_path / "uploads", b"k" * 32, lambda: "http://127.0.0.1", 1024)
    expired = uploads.staged(uuid4(), uuid4(), "a/result")
    current = uploads.staged(uuid4(), uuid4(), "b/result")
    assert uploads.claimed(expired, int((NOW - timedelta(seconds=1)).timestamp()))
    assert uploads.claimed(current, int((NOW + timedelta(hours=1)).timestamp()))
    assert not uploads.claimed(expired, int(NOW.timestamp()))  # a URL takes one result
    expired.write_bytes(b"never read")
    left = expired.with_name(f"{expired.name}.{uuid4().hex}.part")
    left.write_bytes(b"the part of an upload a stopped worker left")
    current.write_bytes(b"not read yet")
    assert uploads.sweep(NOW) == 1
    assert not left.exists()
    assert sorted(path.name for path in (tmp_path / "uploads").iterdir()) == sorted(
        [current.name, f"{current.name}.claim"]
    )
    uploads.unclaimed(current)  # an upload that failed before it was stored: its URL may be used again
    assert uploads.claimed(current, int(NOW.timestamp()) + 60)
