"""Signed commands on the submit topic: the principal's name and an Ed25519 signature in headers.

The signature covers a fixed label, the deployment (`SCRAPESTREAM_DEPLOYMENT_ID`), the topic the
record is published to, the principal's name and the record's value exactly as encoded: none can
be swapped without the key, and a record signed for one topic or deployment is refused on another.
The value carries the command's id and expiry, which intake requires, so replays are bounded too.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from streams.auth.principals import Principal, Principals
from streams.broker.headers import Headers

PRINCIPAL_HEADER = "scrapestream-principal"
SIGNATURE_HEADER = "scrapestream-signature"
LABEL = b"scrapestream-command/2\n"
OLD_LABEL = b"scrapestream-command/1\n"


@dataclass(frozen=True)
class Binding:
    """Where a signed record is valid: the deployment and the topic it is published to."""

    deployment: str
    topic: str


def signed_message(binding: Binding, principal: str, value: bytes) -> bytes:
    parts = (binding.deployment.encode(), binding.topic.encode(), principal.encode())
    return LABEL + b"\n".join(parts) + b"\n" + value


def sign(
    principal: str, private_key: Ed25519PrivateKey, value: bytes, binding: Binding
) -> list[tuple[str, bytes]]:
    signature = private_key.sign(signed_message(binding, principal, value))
    return [(PRINCIPAL_HEADER, principal.encode()), (SIGNATURE_HEADER, base64.b64encode(signature))]


def private_key_from_text(text: str) -> Ed25519PrivateKey:
    """A signing key as `scrapestream principal new` prints it (base64 of the 32 raw bytes)."""
    try:
        return Ed25519PrivateKey.from_private_bytes(base64.b64decode(text, validate=True))
    except (ValueError, TypeError, binascii.Error) as exc:
        raise ValueError("a signing key is the base64 of 32 raw Ed25519 private key bytes") from exc


def claimed_principal(headers: Headers | None) -> str:
    """The principal a record names, unverified (with auth off it only scopes the command's id)."""
    raw = dict(headers or ()).get(PRINCIPAL_HEADER, b"")
    return raw.decode("utf-8", "replace")[:256]


def verify(
    principals: Principals, headers: Headers | None, value: bytes, binding: Binding
) -> Principal | str:
    """The principal who signed `value` for `binding`, or why the record is refused."""
    found = {key: raw for key, raw in headers or ()}
    name_raw, signature_raw = found.get(PRINCIPAL_HEADER), found.get(SIGNATURE_HEADER)
    if name_raw is None or signature_raw is None:
        return "unsigned: auth is on and the record has no principal and signature headers"
    try:
        name = name_raw.decode()
        signature = base64.b64decode(signature_raw, validate=True)
    except (UnicodeDecodeError, ValueError, binascii.Error):
        return "malformed principal or signature header"
    principal = principals.named(name)
    if principal is None or principal.public_key is None:
        return f"unknown signer {name[:256]!r}"
    try:
        principal.public_key.verify(signature, signed_message(binding, name, value))
    except InvalidSignature:
        try:
            principal.public_key.verify(signature, OLD_LABEL + name.encode() + b"\n" + value)
        except InvalidSignature:
            return f"bad signature for {name[:256]!r} (for another topic or deployment, or tampered)"
        return f"{name[:256]!r} signed with scheme 1, which binds no topic or deployment: upgrade the client"
    return principal
