"""Opaque page cursors: where the next page starts, bound to the filters of the listing that made it."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json

from projections.readindex import is_position
from streams.web.errors import ApiError


def filters_digest(*filters: object) -> str:
    return hashlib.sha256(json.dumps([str(value) for value in filters]).encode()).hexdigest()[:16]


def encode_cursor(position: str | None, digest: str) -> str | None:
    if position is None:
        return None
    raw = json.dumps({"after": position, "filters": digest}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, digest: str) -> str | None:
    """The position a cursor resumes after; 400 for a cursor that is not one, or is another listing's."""
    if cursor is None:
        return None
    try:
        document = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        position, filters = document["after"], document["filters"]
    except (ValueError, TypeError, KeyError, binascii.Error) as exc:
        raise ApiError(400, "invalid_cursor", "the cursor is not one this API handed out") from exc
    if not isinstance(position, str) or not is_position(position):
        raise ApiError(400, "invalid_cursor", "the cursor is not one this API handed out")
    if filters != digest:
        raise ApiError(400, "invalid_cursor", "the cursor belongs to a listing with other filters")
    return position
