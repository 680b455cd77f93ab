"""Who is signed in to the console, and the protections every page and action carries.

The session token (`sessions.ConsoleSessions`, never the principal's bearer token) is kept in an
HttpOnly, SameSite=Strict cookie (Secure over TLS); every form, sign-in and sign-out included, carries
a CSRF token checked before anything is done: once signed in, one derived from the session token
(`ConsoleSessions.csrf_for`), so a token pair planted in the browser passes with no session; before
(the sign-in form) or with auth off, one that must equal a second cookie (double submit).
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from fastapi import Request, Response

from streams.auth.principals import TRUSTED, Principal
from streams.web.context import edge_of
from streams.web.sessions import SESSION_COOKIE, SESSION_MAX_AGE_S, ConsoleSessions

CSRF_COOKIE = "scrapestream_csrf"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class Session:
    principal: Principal
    token: str | None  # the session token; None when auth is off
    csrf: str
    fresh_csrf: bool  # the CSRF cookie is set by this response


def session_of(request: Request) -> Session | None:
    """The signed-in principal; None when auth is on and no valid token is in the cookie."""
    csrf, fresh = csrf_of(request)
    if request.app.state.principals is None:
        return Session(TRUSTED, None, csrf, fresh)
    token = request.cookies.get(SESSION_COOKIE)
    principal = None if not token else sessions_of(request).principal_of(token)
    if principal is None or token is None:
        return None
    return Session(principal, token, sessions_of(request).csrf_for(token), False)


def csrf_of(request: Request) -> tuple[str, bool]:
    """This browser's CSRF token, and whether this response must set it (a new one)."""
    csrf = request.cookies.get(CSRF_COOKIE, "")
    return (secrets.token_urlsafe(32), True) if len(csrf) < 32 else (csrf, False)


def sessions_of(request: Request) -> ConsoleSessions:
    sessions: ConsoleSessions = request.app.state.sessions
    return sessions


def csrf_refusal(request: Request, sent: str, signing_in: bool = False) -> str | None:
    """Why an action's CSRF token is refused, or None: the signed-in session's own token, else (the
    sign-in form, auth off) the double-submit cookie's."""
    session = None if signing_in else session_of(request)
    expected = (
        request.cookies.get(CSRF_COOKIE, "") if session is None or session.token is None else session.csrf
    )
    if len(expected) < 32 or not hmac.compare_digest(expected.encode(), sent.encode()):
        return "the form's CSRF token does not match this browser's: reload the page and try again"
    return None


def protect(
    request: Request, response: Response, session: Session | None, csrf: tuple[str, bool] | None = None
) -> Response:
    """The console's headers, and the CSRF cookie when this response starts one."""
    for name, value in PAGE_HEADERS.items():
        response.headers.setdefault(name, value)  # an image keeps its own `CSP: sandbox`
    csrf = csrf or (None if session is None else (session.csrf, session.fresh_csrf))
    if csrf is not None and csrf[1]:
        _cookie(request, response, CSRF_COOKIE, csrf[0])
    return response


def sign_in(request: Request, response: Response, principal: Principal) -> None:
    _cookie(request, response, SESSION_COOKIE, sessions_of(request).issue(principal))


async def sign_out(request: Request, response: Response) -> None:
    """Revokes the session (here at once, on the other workers as they are told) and clears the cookie."""
    token = request.cookies.get(SESSION_COOKIE)
    revoked = None if not token else sessions_of(request).revoke(token)
    if revoked is not None:
        await edge_of(request).tell_peers(f"/_shard/sessions/{revoked[0]}/revoke?expires={revoked[1]}")
    response.delete_cookie(SESSION_COOKIE, path="/ui")


def _cookie(request: Request, response: Response, name: str, value: str) -> None:
    response.set_cookie(
        name,
        value,
        max_age=SESSION_MAX_AGE_S,
        path="/ui",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
