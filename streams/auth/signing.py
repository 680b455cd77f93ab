"""Signed commands on the submit topic: the principal's name and an Ed25519 signature in headers.

The signature covers a fixed label, the principal's name and the record's value exactly as
encoded, so neither can be swapped without the key.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from streams.auth.principals import Principal, Principals

PRINCIPAL_HEADER = "scrapestream-principal"
SIGNATURE_HEADER = "scrapestream-signature"
LABEL = b"scrapestream-command/1\n"
Headers = Sequence[tuple[str, bytes]]


def signed_message(principal: str, value: bytes) -> bytes:
    return LABEL + principal.encode() + b"\n" + value


def sign(principal: str, private_key: Ed25519PrivateKey, value: bytes) -> list[tuple[str, bytes]]:
    signature = private_key.sign(signed_message(principal, value))
    return [(PRINCIPAL_HEADER, principal.encode()), (SIGNATURE_HEADER, base64.b64encode(signature))]


def private_key_from_text(text: str) -> Ed25519PrivateKey:
    """A signing key as `scrapestream principal new` prints it (base64 of the 32 raw bytes)."""
    try:
        return Ed25519PrivateKey.from_private_bytes(base64.b64decode(text, validate=True))
    except (ValueError, TypeError, binascii.Error) as exc:
        raise ValueError("a signing key is the base64 of 32 raw Ed25519 private key bytes") from exc


def verify(principals: Principals, headers: Headers | None, value: bytes) -> Principal | str:
    """The principal who signed `value`, or why the record is refused."""
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
        principal.public_key.verify(signature, signed_message(name, value))
    except InvalidSignature:
        return f"bad signature for {name[:256]!r}"
    return principal
