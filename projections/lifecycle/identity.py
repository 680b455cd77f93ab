"""Deterministic identities: the canonical request, job ids, lease ids, event ids.

The same input always yields the same id, so a redelivered command cannot mint a new one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import SplitResult, urlsplit, urlunsplit
from uuid import UUID

import idna

from projections.lifecycle.limits import MAX_HEADER_VALUE_BYTES, clip, utf8_len
from schemas.binary import uuid_from_int
from schemas.enums import HttpMethod, RejectionReason
from schemas.records import Request
from schemas.types import uuid_text

JOB_NAMESPACE = UUID("6f1c7c2e-3f0a-5d1e-9a47-0c2b8d6e4f11")
# Ids that outside input names are hashed into namespaces of their own, so no public command can
# carry the id of an internal one (a report, a renewal, a purge) or of another principal's.
PUBLIC_COMMAND_NAMESPACE = UUID("0d8f5c1a-7e2b-5c43-9f61-2a9b4e7d3c18")
REFUSED_SUBMISSION_NAMESPACE = UUID("9c4e2b7a-1d3f-5a86-b0c9-6e1f8a2d4b57")
AUDIT_STREAM_NAMESPACE = UUID("e2a71f4c-5b9d-5e08-8c3a-7d6b0f9e1a24")
MONITOR_NAMESPACE = UUID("4b7d2e91-0c3a-5f68-a1e5-8d9c6b2f0a37")
ALLOWED_HEADERS = frozenset({"accept", "accept-language", "user-agent", "referer", "cache-control"})
ALLOWED_SCHEMES = frozenset({"http", "https"})
_CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f]")
_NOT_PRINTABLE = re.compile(r"[^\t\x20-\x7e]")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Rejection:
    reason: RejectionReason
    detail: str


@dataclass(frozen=True)
class CanonicalRequest:
    request: Request
    request_hash: str


def _canonical_url(url: str) -> SplitResult | Rejection:
    shown = clip(url, 256)
    text = url.strip()
    if _CONTROL_OR_SPACE.search(text):
        return Rejection(
            RejectionReason.INVALID_URL, f"URL {shown!r} contains whitespace or control characters"
        )
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        return Rejection(RejectionReason.INVALID_URL, f"unparseable URL {shown!r}: {exc}")
    scheme = parts.scheme.lower()
    if not scheme:
        return Rejection(
            RejectionReason.INVALID_URL, f"{shown!r} is not a URL: give one such as https://example.com/"
        )
    if scheme not in ALLOWED_SCHEMES:
        return Rejection(
            RejectionReason.UNSUPPORTED_SCHEME, f"scheme {clip(scheme, 32)!r} is not http or https"
        )
    host = _ascii_host(parts.hostname or "")
    if host is None:
        return Rejection(RejectionReason.INVALID_URL, f"URL {shown!r} has no valid host name")
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return SplitResult(scheme, netloc, parts.path or "/", parts.query, "")


def _ascii_host(host: str) -> str | None:
    """The host in lower-case A-labels (IDNA 2008, UTS 46 mapping), or None when it has none."""
    if not host:
        return None
    if host.isascii():
        lowered = host.lower()
        return lowered if all(0 < len(label) <= 63 for label in lowered.rstrip(".").split(".")) else None
    try:
        return idna.encode(host, uts46=True).decode("ascii").lower()
    except (idna.IDNAError, UnicodeError, ValueError):
        return None


def _header_problem(headers: dict[str, str]) -> str | None:
    disallowed = sorted(set(headers) - ALLOWED_HEADERS)
    if disallowed:
        return f"headers not allowed: {', '.join(clip(name, 64) for name in disallowed[:8])}"
    for name, value in headers.items():
        if utf8_len(value) > MAX_HEADER_VALUE_BYTES:
            return f"header {name} is longer than {MAX_HEADER_VALUE_BYTES} bytes"
        if _NOT_PRINTABLE.search(value):
            return f"header {name} has characters other than printable ASCII"
    return None


def canonicalize(request: Request) -> CanonicalRequest | Rejection:
    """Normalise once: canonical URL, method, lower-cased allowed headers; hash the result."""
    return _canonicalize(request.url, request.method, tuple(request.headers.items()))


@functools.lru_cache(maxsize=16_384)  # one submission is canonicalized by intake, identity and validation
def _canonicalize(
    url: str, method: HttpMethod, raw_headers: tuple[tuple[str, str], ...]
) -> CanonicalRequest | Rejection:
    parts = _canonical_url(url)
    if isinstance(parts, Rejection):
        return parts
    headers = {name.strip().lower(): value.strip() for name, value in raw_headers}
    problem = _header_problem(headers)
    if problem is not None:
        return Rejection(RejectionReason.DISALLOWED_HEADER, problem)
    request = Request(url=urlunsplit(parts), method=method, headers=dict(sorted(headers.items())))
    fields = {"url": request.url, "method": method.value, "headers": request.headers}
    payload = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return CanonicalRequest(request, hashlib.sha256(payload.encode()).hexdigest())


def origin_of(url: str) -> str | None:
    """`scheme://host[:port]` of an http(s) URL (the port only when not the scheme's default)."""
    parts = _canonical_url(url)
    return None if isinstance(parts, Rejection) else f"{parts.scheme}://{parts.netloc}"


def callback_url_problem(url: str) -> str | None:
    """Why `url` cannot receive callbacks (shown without its secrets), or None."""
    if isinstance(_canonical_url(url), Rejection):
        return f"callback_url {clip(shown_url(url), 256)!r} is not an absolute http(s) URL"
    if "@" in urlsplit(url).netloc:
        return (
            f"callback_url {clip(shown_url(url), 256)!r} carries a user name or password, which every "
            "reader of the job's history would see: authenticate the receiver by the callback signature"
        )
    return None


def is_valid_callback_url(url: str) -> bool:
    return callback_url_problem(url) is None


def shown_url(url: str) -> str:
    """`url` as views, explanations and audit show it: a user name or password, and the values of
    its query, replaced by `***` (a receiver's URL may carry a secret)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    netloc = parts.netloc.rpartition("@")[2]
    if "@" in parts.netloc:
        netloc = f"***@{netloc}"
    query = "&".join(f"{pair.partition('=')[0]}=***" for pair in parts.query.split("&") if pair)
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


@functools.lru_cache(maxsize=4096)
def host_of(url: str) -> str:
    """The politeness key of a URL: its lower-cased host."""
    return (urlsplit(url).hostname or "").lower()


@functools.lru_cache(maxsize=16_384)  # intake, the lifecycle and the client all derive it
def job_id_for(caller_identity: str, idempotency_key: str) -> UUID:
    return name_based(JOB_NAMESPACE, f"{caller_identity}\n{idempotency_key}")


def refused_job_id_for(submitter: str, caller_identity: str, idempotency_key: str) -> UUID:
    """Where a submission made as another caller without the right to is recorded: the submitter's
    own stream, never the other caller's job."""
    return name_based(REFUSED_SUBMISSION_NAMESPACE, f"{submitter}\n{caller_identity}\n{idempotency_key}")


def public_command_id(principal: str, command_id: UUID) -> UUID:
    """The id a public command is decided under: its sender's id, in that sender's namespace."""
    return name_based(PUBLIC_COMMAND_NAMESPACE, f"{principal}\n{uuid_text(command_id)}")


def audit_stream_id(actor_id: str, at: datetime) -> UUID:
    """The stream that keeps one principal's audit records of the hour of `at`: its reads, downloads
    and refused commands, so nothing another principal does grows a job's own history."""
    return name_based(AUDIT_STREAM_NAMESPACE, f"{actor_id}\n{at.strftime('%Y-%m-%dT%H')}")


def lease_id_for(job_id: UUID, attempt_number: int) -> UUID:
    return name_based(job_id, f"lease:{attempt_number}")


def event_ids(command_id: UUID, job_id: UUID) -> Callable[[int], UUID]:
    """The ids of one command's events on one job: `uuid5(command_id, "<job_id>:<index>")`,
    the name's shared prefix hashed once."""
    prefix = hashlib.sha1(command_id.bytes + f"{uuid_text(job_id)}:".encode(), usedforsecurity=False)

    def event_id(index: int) -> UUID:
        hashed = prefix.copy()
        hashed.update(str(index).encode())
        return _version_5(hashed.digest())

    return event_id


_VERSION_5 = (0x5000 << 64) | (0x8000 << 48)
_VERSION_MASK = ~((0xF000 << 64) | (0xC000 << 48))


def name_based(namespace: UUID, name: str) -> UUID:
    """`uuid.uuid5(namespace, name)`, built without the checks of `UUID.__init__` (a hot path)."""
    return _version_5(hashlib.sha1(namespace.bytes + name.encode(), usedforsecurity=False).digest())


def _version_5(digest: bytes) -> UUID:
    return uuid_from_int((int.from_bytes(digest[:16], "big") & _VERSION_MASK) | _VERSION_5)


def job_target(job_id: UUID) -> str:
    """How audit records name the job they are about."""
    return f"job:{job_id}"


def monitor_target(monitor_id: UUID) -> str:
    """How audit records name the monitor they are about."""
    return f"monitor:{monitor_id}"
