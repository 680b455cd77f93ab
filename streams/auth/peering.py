"""How workers prove to each other that a request comes from a peer: an HMAC over the request.

Every worker holds the same `SCRAPESTREAM_PEER_SECRET`. A peer request names the principal it
asks for (the caller the asking worker authenticated) and is signed with the secret over a fixed
label, the method, the path with its query, that principal and the time; it is accepted within
`MAX_SKEW_S`. A caller's bearer token is never a peer credential.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from typing import TYPE_CHECKING

from schemas.enums import ActorRole
from streams.auth.principals import Principal
from streams.errors import UsageError

if TYPE_CHECKING:
    from streams.settings import Settings

LABEL = b"scrapestream-peer/1\n"
MIN_SECRET_BYTES = 32
MAX_SKEW_S = 60
NAME_HEADER = "scrapestream-peer-principal"
ROLE_HEADER = "scrapestream-peer-role"
TIME_HEADER = "scrapestream-peer-at"
SIGNATURE_HEADER = "scrapestream-peer-signature"


class PeerSecretError(UsageError):
    """The peer secret cannot be used; the message says which setting to change."""


class PeerKey:
    def __init__(self, secret: bytes) -> None:
        if len(secret) < MIN_SECRET_BYTES:
            raise PeerSecretError(
                f"SCRAPESTREAM_PEER_SECRET must be at least {MIN_SECRET_BYTES} bytes "
                "(for example `python -c 'import secrets; print(secrets.token_hex(32))'`)"
            )
        self._secret = secret

    def derived(self, purpose: bytes) -> bytes:
        """A key of its own for `purpose`, the same on every worker, that tells nothing of the secret."""
        return hmac.new(self._secret, b"scrapestream-derived/1\n" + purpose, hashlib.sha256).digest()

    def headers(self, method: str, target: str, principal: Principal, now_s: int) -> dict[str, str]:
        """The headers of a peer request for `target` (path and query) made on `principal`'s behalf."""
        signature = self._sign(method, target, principal.name, principal.role, now_s)
        return {
            NAME_HEADER: base64.b64encode(principal.name.encode()).decode(),
            ROLE_HEADER: principal.role.value,
            TIME_HEADER: str(now_s),
            SIGNATURE_HEADER: base64.b64encode(signature).decode(),
        }

    def verify(self, method: str, target: str, headers: Mapping[str, str], now_s: int) -> Principal | str:
        """The principal a peer asks for, or why the request is not a peer's."""
        try:
            name = base64.b64decode(headers[NAME_HEADER], validate=True).decode()
            role = ActorRole(headers[ROLE_HEADER])
            at = int(headers[TIME_HEADER])
            signature = base64.b64decode(headers[SIGNATURE_HEADER], validate=True)
        except (KeyError, ValueError, UnicodeDecodeError, binascii.Error):
            return "this route answers only other workers (no valid peer credential)"
        if abs(now_s - at) > MAX_SKEW_S:
            return "the peer credential is not current"
        if not hmac.compare_digest(signature, self._sign(method, target, name, role, at)):
            return "this route answers only other workers (the peer signature does not verify)"
        return Principal(name, role)

    def _sign(self, method: str, target: str, name: str, role: ActorRole, at: int) -> bytes:
        message = b"\n".join(
            [
                LABEL,
                method.upper().encode(),
                target.encode(),
                name.encode(),
                role.value.encode(),
                str(at).encode(),
            ]
        )
        return hmac.new(self._secret, message, hashlib.sha256).digest()


def peer_secret(settings: Settings) -> bytes | None:
    """The configured peer secret's bytes, from the setting or its file; None when unset."""
    if settings.peer_secret is not None:
        return settings.peer_secret.get_secret_value().encode()
    if settings.peer_secret_file is None:
        return None
    try:
        return settings.peer_secret_file.read_bytes().strip()
    except OSError as exc:
        raise PeerSecretError(
            f"cannot read SCRAPESTREAM_PEER_SECRET_FILE {settings.peer_secret_file}: {exc}"
        ) from exc
