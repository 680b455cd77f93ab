"""Who is asking: a bearer token becomes a principal; with auth off everyone is trusted."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from streams.auth.principals import TRUSTED, Principal, Principals
from streams.web.errors import ApiError

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
