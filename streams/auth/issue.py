"""New principals: a bearer token and an Ed25519 signing key, and the entry a principals file keeps."""

from __future__ import annotations

import base64
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from schemas.enums import ActorRole
from streams.auth.principals import Principals, PrincipalsError, token_digest


@dataclass(frozen=True)
class IssuedPrincipal:
    """The secrets are shown once; only `entry` (a token hash and a public key) is stored."""

    token: str
    signing_key: str
    entry: dict[str, Any]


ISSUED_PREFIX = "sst_"


def issue(name: str, role: ActorRole) -> IssuedPrincipal:
    # The prefix keeps a token from beginning with "-", which a command line would take for an option.
    token = ISSUED_PREFIX + secrets.token_urlsafe(32)
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    entry = {
        "name": name,
        "role": role.value,
        "token_sha256": token_digest(token).hex(),
        "public_key": base64.b64encode(public).decode(),
    }
    return IssuedPrincipal(token, base64.b64encode(private).decode(), entry)


def add_to_file(path: Path, entry: dict[str, Any]) -> None:
    """Adds the entry to a principals file (created, readable by its owner only), refusing a taken name."""
    document: dict[str, Any] = {"principals": []}
    if path.exists():
        document = json.loads(path.read_text())
        Principals.from_json(json.dumps(document), str(path))  # the file must be valid before it grows
    if any(existing.get("name") == entry["name"] for existing in document["principals"]):
        raise PrincipalsError(f"{path} already has a principal named {entry['name']!r}")
    document["principals"].append(entry)
    temporary = path.with_name(f".{path.name}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(json.dumps(document, indent=2) + "\n")
    os.replace(temporary, path)
