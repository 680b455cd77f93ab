"""Who is signed in to the console, and the protections every page and action carries.

The bearer token is kept in an HttpOnly, SameSite=Strict cookie (Secure over TLS); actions carry a
CSRF token that must equal a second cookie (double submit), checked before the API is asked.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from fastapi import Request, Response

from streams.auth.principals import TRUSTED, Principal, Principals

SESSION_COOKIE = "scrapestream_session"
CSRF_COOKIE = "scrapestream_csrf"
SESSION_MAX_AGE_S = 12 * 3600
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
    token: str | None  # None when auth is off
    csrf: str
    fresh_csrf: bool  # the CSRF cookie is set by this response


def session_of(request: Request) -> Session | None:
    """The signed-in principal; None when auth is on and no valid token is in the cookie."""
    principals: Principals | None = request.app.state.principals
    csrf = request.cookies.get(CSRF_COOKIE, "")
    fresh = len(csrf) < 32
    if fresh:
        csrf = secrets.token_urlsafe(32)
    if principals is None:
        return Session(TRUSTED, None, csrf, fresh)
    token = request.cookies.get(SESSION_COOKIE)
    principal = None if not token else principals.by_token(token)
    if principal is None or token is None:
        return None
    return Session(principal, token, csrf, fresh)


def csrf_refusal(request: Request, sent: str) -> str | None:
    """Why an action's CSRF token is refused, or None."""
    expected = request.cookies.get(CSRF_COOKIE, "")
    if len(expected) < 32 or not hmac.compare_digest(expected.encode(), sent.encode()):
        return "the form's CSRF token does not match this browser's: reload the page and try again"
    return None


def protect(request: Request, response: Response, session: Session | None) -> Response:
    """The console's headers, and the CSRF cookie when this response starts one."""
    response.headers.update(PAGE_HEADERS)
    if session is not None and session.fresh_csrf:
        _cookie(request, response, CSRF_COOKIE, session.csrf)
    return response


def sign_in(request: Request, response: Response, token: str) -> None:
    _cookie(request, response, SESSION_COOKIE, token)


def sign_out(response: Response) -> None:
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
