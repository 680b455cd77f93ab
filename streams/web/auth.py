"""Who is asking: a bearer token becomes a principal; with auth off everyone is trusted."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from streams.auth.peering import PeerKey
from streams.auth.principals import TRUSTED, Principal, Principals
from streams.clock import utc_now
from streams.web.errors import ApiError
from streams.web.sessions import SESSION_HEADER

bearer = HTTPBearer(
    auto_error=False,
    description="A principal's token (`scrapestream principal new` prints one); unused when auth is off",
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


async def authenticated(request: Request, credentials: Credentials) -> Principal:
    """A FastAPI dependency: 401 when no token or an unknown one is sent, else the token's principal."""
    principals: Principals | None = request.app.state.principals
    if principals is None:
        return TRUSTED
    console = request.headers.get(SESSION_HEADER)
    if console is not None:  # the console's own in-process call (the edge strips it from others)
        principal = request.app.state.sessions.principal_of(console)
        if principal is None:
            raise ApiError(401, "unauthenticated", "the console session has ended: sign in again")
        return principal  # type: ignore[no-any-return]
    if credentials is None:
        raise ApiError(
            401,
            "unauthenticated",
            "this API needs a bearer token: send `Authorization: Bearer <token>`",
            {"WWW-Authenticate": "Bearer"},
        )
    principal = principals.by_token(credentials.credentials)
    if principal is None:
        raise ApiError(
            401,
            "invalid_token",
            "the bearer token matches no principal (revoked, mistyped or for another deployment)",
            {"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    return principal


Caller = Annotated[Principal, Depends(authenticated)]


async def peer_asking(request: Request) -> Principal:
    """A FastAPI dependency of the internal routes: the caller a peer asks for, proven by the peer
    credential; a caller's own token is refused there (403)."""
    key: PeerKey | None = request.app.state.peer_key
    if key is None and request.app.state.principals is None:
        return TRUSTED  # auth off and no peer secret: every request is trusted anyway
    if key is None:
        raise ApiError(403, "forbidden", "this worker has no peer secret: it answers no internal route")
    verdict = key.verify(request.method, raw_target(request), request.headers, int(utc_now().timestamp()))
    if isinstance(verdict, str):
        raise ApiError(403, "forbidden", verdict)
    return verdict


def raw_target(request: Request) -> str:
    """The path and query exactly as the client sent them."""
    path: bytes = request.scope.get("raw_path") or request.scope["path"].encode()
    query: bytes = request.scope.get("query_string", b"")
    return (path + b"?" + query if query else path).decode("latin-1")


PeerCaller = Annotated[Principal, Depends(peer_asking)]
