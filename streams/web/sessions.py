"""Console sessions: tokens of their own, never a principal's bearer token, signed by the worker,
expiring, and revoked by signing out.

A session token names its id, its principal and when it expires, with an HMAC over them; workers
sharing a peer secret verify each other's. The API answers a session only through the console's
in-process calls (`SESSION_HEADER`, which the edge strips from every outside request), so a stolen
cookie is no API token, and a signed-out one is refused everywhere its revocation reached.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable
from http.cookies import CookieError, SimpleCookie

from streams.auth.principals import Principal, Principals

SESSION_COOKIE = "scrapestream_session"
SESSION_HEADER = "x-scrapestream-console"
SESSION_MAX_AGE_S = 8 * 3600
VERSION = "s1"
SESSION_ID_LENGTH = 32


class ConsoleSessions:
    def __init__(self, principals: Principals | None, key: bytes | None, clock: Callable[[], float]) -> None:
        self._principals = principals
        self._key = key or secrets.token_bytes(32)  # from the peer secret: every worker verifies it
        self._clock = clock
        self._revoked: dict[str, float] = {}  # session id -> when its token expires anyway

    def issue(self, principal: Principal) -> str:
        session_id = secrets.token_hex(SESSION_ID_LENGTH // 2)
        expires = int(self._clock()) + SESSION_MAX_AGE_S
        name = base64.urlsafe_b64encode(principal.name.encode()).decode().rstrip("=")
        signed = f"{VERSION}.{session_id}.{expires}.{name}"
        return f"{signed}.{self._mac(signed)}"

    def csrf_for(self, token: str) -> str:
        """The CSRF token of the session `token` names: derived from it, so no other pair (one a
        sibling host planted in the browser, say) passes with this session."""
        return self._mac(f"csrf.{token}")

    def principal_of(self, token: str) -> Principal | None:
        """The session's principal as the principals file names it now; None when the token is not
        this deployment's, has expired or was signed out."""
        parts = token.split(".")
        if self._principals is None or len(parts) != 5 or parts[0] != VERSION:
            return None
        signed = ".".join(parts[:4])
        if not hmac.compare_digest(self._mac(signed), parts[4]):
            return None
        session_id, expires, name = parts[1], parts[2], parts[3]
        if not expires.isdigit() or int(expires) <= self._clock() or session_id in self._revoked:
            return None
        try:
            decoded = base64.urlsafe_b64decode(name + "=" * (-len(name) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        return self._principals.named(decoded)

    def revoke(self, token: str) -> tuple[str, int] | None:
        """Signs a session out; its id and expiry, for the other workers (None: nothing to revoke,
        a token not this deployment's or no longer valid)."""
        if self.principal_of(token) is None:
            return None
        _, session_id, expires, *_ = token.split(".")
        self.revoke_id(session_id, int(expires))
        return session_id, int(expires)

    def revoke_id(self, session_id: str, expires: int) -> None:
        """Signs out a session another worker ended; kept until its token expires anyway."""
        now = self._clock()
        self._revoked = {sid: until for sid, until in self._revoked.items() if until > now}
        if expires > now and len(session_id) == SESSION_ID_LENGTH:
            self._revoked[session_id] = float(expires)

    def from_cookie_header(self, header: str) -> Principal | None:
        try:
            cookies = SimpleCookie(header)
        except CookieError:
            return None
        morsel = cookies.get(SESSION_COOKIE)
        return None if morsel is None else self.principal_of(morsel.value)

    def _mac(self, signed: str) -> str:
        digest = hmac.new(self._key, signed.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")
