"""Records a hostile producer can put on the submit topic, one of each kind.

Each decodes far enough to reach a different failure: no marker, unknown schema, truncation,
out-of-range logical values, invalid UUIDs and UTF-8, the wrong record type, oversized input.
"""

from __future__ import annotations

import copy
import io
from datetime import timedelta
from typing import Any
from uuid import uuid4

import fastavro

from schemas.codec import SINGLE_OBJECT_MARKER, encode
from schemas.commands import PurgeAuditRecords, SubmitJob
from schemas.enums import ActorRole
from schemas.records import Request
from schemas.registry import current_schemas
from streams.clock import utc_now

YEAR_10000_MS = 253_402_300_800_000 + 86_400_000


def _plain(schema: Any) -> Any:
    """The schema with logical types removed: same fingerprint (the canonical form drops them)."""
    if isinstance(schema, dict):
        return {key: _plain(value) for key, value in schema.items() if key != "logicalType"}
    if isinstance(schema, list):
        return [_plain(item) for item in schema]
    return schema


def _raw_submit(**overrides: Any) -> bytes:
    known = current_schemas()["SubmitJob"]
    record: dict[str, Any] = {
        "command_id": str(uuid4()),
        "caller_identity": "poison",
        "idempotency_key": None,
        "request": {"url": "https://example.com/", "method": "GET", "headers": {}},
        "job_type": "http.fetch",
        "policy_class": "STANDARD",
        "cache_mode": "REUSE_VALID",
        "capture_mode": "RAW_BODY",
        "retention_class": "CACHE_7D",
        "transport_policy": "DIRECT_ONLY",
        "deadline_at": int((utc_now() + timedelta(hours=1)).timestamp() * 1000),
        "attempt_limit": None,
        "callback_url": None,
        "labels": {},
    } | overrides
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(_plain(copy.deepcopy(known.standalone))), record)
    return SINGLE_OBJECT_MARKER + known.fingerprint + body.getvalue()


def poison_records(origin_url: str = "https://example.com/") -> dict[str, bytes]:
    """Every kind of hostile submit record, by name."""
    valid = encode(
        SubmitJob(
            caller_identity="poison",
            request=Request(url=origin_url),
            deadline_at=utc_now() + timedelta(hours=1),
        )
    )
    return {
        "not_avro": b'{"caller_identity": "json is not avro"}',
        "empty": b"",
        "unknown_fingerprint": b"\xc3\x01" + bytes(range(1, 9)) + b"\x00",
        "truncated": valid[: len(valid) // 2],
        "trailing_bytes": valid + b"\x00\x01",
        "timestamp_past_9999": _raw_submit(deadline_at=YEAR_10000_MS),
        "timestamp_before_year_1": _raw_submit(deadline_at=-62_135_596_800_001 - 86_400_000),
        "invalid_uuid": _raw_submit(command_id="not-a-uuid"),
        "invalid_utf8": valid[:12] + b"\x0e\xff\xfe\xfd\xfc\xfb\xfa\xf9" + valid[20:],
        "huge_declared_length": valid[:10] + b"\x02" + b"\xfe\xff\xff\xff\xff\xff\xff\xff\x01",
        "wrong_record_type": encode(Request(url="https://example.com/")),  # valid, but not a command
        # An internal command (maintenance's) is never public input.
        "internal_command": encode(
            PurgeAuditRecords(
                command_id=uuid4(),
                job_id=uuid4(),
                before=utc_now(),
                actor_id="scrapestream-maintenance",
                actor_role=ActorRole.ADMIN,
                reason="a caller's purge",
            )
        ),
    }


def refused_submissions() -> dict[str, bytes]:
    """Valid records whose submissions the lifecycle must reject, each with its reason."""
    return {
        "INPUT_TOO_LARGE": _raw_submit(labels={f"k{i}": "v" * 1_000 for i in range(400)}),
        "INVALID_URL": _raw_submit(request={"url": "http://host:abc/", "method": "GET", "headers": {}}),
        "DISALLOWED_HEADER": _raw_submit(
            request={"url": "https://example.com/", "method": "GET", "headers": {"user-agent": "a\r\nb: c"}}
        ),
    }
