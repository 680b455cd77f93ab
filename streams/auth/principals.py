"""Principals and their roles, from a JSON file or the environment; bearer tokens checked by hash.

The document: `{"principals": [{"name": "svc-a", "role": "SERVICE", "token_sha256": "<hex>",
"public_key": "<base64 Ed25519 public key>", "runs": ["acme.thumbnail"]}]}`. A principal needs a
token to use the HTTP API and a public key to sign commands on the submit topic; neither secret is
stored here, only the token's SHA-256 and the public half of the signing key. `runs` names the
remotely run job types whose attempts it may report (none by default).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from schemas.enums import ActorRole
from streams.errors import UsageError

ANONYMOUS = "anonymous"


class PrincipalsError(UsageError):
    """The principals document cannot be used; the message says where and why."""


@dataclass(frozen=True)
class Principal:
    name: str
    role: ActorRole
    token_sha256: bytes | None = None
    public_key: Ed25519PublicKey | None = None
    runs: frozenset[str] = frozenset()  # the remotely run job types it may report attempts of


TRUSTED = Principal(ANONYMOUS, ActorRole.ADMIN)  # every request when auth is off


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class Principals:
    def __init__(self, principals: list[Principal]) -> None:
        names = [principal.name for principal in principals]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise PrincipalsError(f"principal names must be unique: {', '.join(duplicates)}")
        self._by_name = {principal.name: principal for principal in principals}

    def __len__(self) -> int:
        return len(self._by_name)

    def named(self, name: str) -> Principal | None:
        return self._by_name.get(name)

    def by_token(self, token: str) -> Principal | None:
        """The principal whose token this is; every stored digest is compared, in constant time."""
        digest = token_digest(token)
        found = None
        for principal in self._by_name.values():
            stored = principal.token_sha256
            if stored is not None and hmac.compare_digest(stored, digest):
                found = principal
        return found

    @classmethod
    def from_json(cls, text: str, source: str) -> Principals:
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise PrincipalsError(f"{source}: not JSON: {exc}") from exc
        entries = document.get("principals") if isinstance(document, dict) else None
        if not isinstance(entries, list):
            raise PrincipalsError(f'{source}: expected {{"principals": [...]}}')
        principals = [
            _principal(entry, f"{source}: principals[{index}]") for index, entry in enumerate(entries)
        ]
        try:
            return cls(principals)
        except PrincipalsError as exc:
            raise PrincipalsError(f"{source}: {exc}") from exc

    @classmethod
    def from_file(cls, path: Path) -> Principals:
        try:
            text = path.read_text()
        except OSError as exc:
            raise PrincipalsError(f"cannot read the principals file {path}: {exc}") from exc
        return cls.from_json(text, str(path))


def _principal(entry: Any, where: str) -> Principal:
    if not isinstance(entry, dict):
        raise PrincipalsError(f"{where}: expected an object")
    name, role = entry.get("name"), entry.get("role")
    if not isinstance(name, str) or not name.strip():
        raise PrincipalsError(f"{where}: name must be a non-empty string")
    try:
        actor_role = ActorRole(str(role))
    except ValueError as exc:
        raise PrincipalsError(f"{where}: role must be one of {', '.join(ActorRole)}") from exc
    runs = entry.get("runs", [])
    if not isinstance(runs, list) or not all(isinstance(job_type, str) for job_type in runs):
        raise PrincipalsError(f"{where}: runs must be a list of job type names")
    digest, key = _digest(entry.get("token_sha256"), where), _public_key(entry, where)
    return Principal(name, actor_role, digest, key, frozenset(runs))


def _digest(value: Any, where: str) -> bytes | None:
    if value is None:
        return None
    try:
        digest = bytes.fromhex(value) if isinstance(value, str) else b""
    except ValueError:
        digest = b""
    if len(digest) != 32:
        raise PrincipalsError(f"{where}: token_sha256 must be 64 hex digits")
    return digest


def _public_key(entry: dict[str, Any], where: str) -> Ed25519PublicKey | None:
    value = entry.get("public_key")
    if value is None:
        return None
    try:
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(value, validate=True))
    except (ValueError, TypeError, binascii.Error) as exc:
        raise PrincipalsError(f"{where}: public_key must be a base64 Ed25519 public key") from exc


def load_principals(enabled: bool, path: Path | None, document: str | None) -> Principals | None:
    """The principals a worker authenticates against; None when auth is off."""
    if not enabled:
        return None
    if path is not None and document is not None:
        raise PrincipalsError("set SCRAPESTREAM_PRINCIPALS_FILE or SCRAPESTREAM_PRINCIPALS, not both")
    if path is not None:
        return Principals.from_file(path)
    if document is not None:
        return Principals.from_json(document, "SCRAPESTREAM_PRINCIPALS")
    raise PrincipalsError(
        "auth is on but no principals are configured: set SCRAPESTREAM_PRINCIPALS_FILE "
        "(see `scrapestream principal new`), or SCRAPESTREAM_AUTH_ENABLED=false for a trusted network"
    )
