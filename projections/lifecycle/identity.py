"""Deterministic identities: the canonical request, job ids, lease ids, event ids.

The same input always yields the same id, so a redelivered command cannot mint a new one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit, urlunsplit
from uuid import UUID, uuid5

import idna

from projections.lifecycle.limits import MAX_HEADER_VALUE_BYTES, clip, utf8_len
from schemas.enums import RejectionReason
from schemas.records import Request

JOB_NAMESPACE = UUID("6f1c7c2e-3f0a-5d1e-9a47-0c2b8d6e4f11")
ALLOWED_HEADERS = frozenset({"accept", "accept-language", "user-agent", "referer", "cache-control"})
ALLOWED_SCHEMES = frozenset({"http", "https"})
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
    if any(ord(char) < 0x21 or ord(char) == 0x7F for char in text):
        return Rejection(
            RejectionReason.INVALID_URL, f"URL {shown!r} contains whitespace or control characters"
        )
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        return Rejection(RejectionReason.INVALID_URL, f"unparseable URL {shown!r}: {exc}")
    scheme = parts.scheme.lower()
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
        if not all(char == "\t" or 0x20 <= ord(char) < 0x7F for char in value):
            return f"header {name} has characters other than printable ASCII"
    return None


def canonicalize(request: Request) -> CanonicalRequest | Rejection:
    """Normalise once: canonical URL, method, lower-cased allowed headers; hash the result."""
    parts = _canonical_url(request.url)
    if isinstance(parts, Rejection):
        return parts
    headers = {name.strip().lower(): value.strip() for name, value in request.headers.items()}
    problem = _header_problem(headers)
    if problem is not None:
        return Rejection(RejectionReason.DISALLOWED_HEADER, problem)
    url = urlunsplit(parts)
    canonical = Request(url=url, method=request.method, headers=dict(sorted(headers.items())))
    payload = json.dumps(canonical.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return CanonicalRequest(canonical, hashlib.sha256(payload.encode()).hexdigest())


def is_valid_callback_url(url: str) -> bool:
    return not isinstance(_canonical_url(url), Rejection)


def host_of(url: str) -> str:
    """The politeness key of a URL: its lower-cased host."""
    return (urlsplit(url).hostname or "").lower()


def job_id_for(caller_identity: str, idempotency_key: str) -> UUID:
    return uuid5(JOB_NAMESPACE, f"{caller_identity}\n{idempotency_key}")


def lease_id_for(job_id: UUID, attempt_number: int) -> UUID:
    return uuid5(job_id, f"lease:{attempt_number}")


def event_id_for(command_id: UUID, job_id: UUID, index: int) -> UUID:
    return uuid5(command_id, f"{job_id}:{index}")
