"""Signing in to the console as a browser does: the sign-in page's CSRF cookie, then the form."""

from __future__ import annotations

import re

import httpx

from streams.web.console.session import CSRF_COOKIE, SESSION_COOKIE


async def login_csrf(http: httpx.AsyncClient) -> str:
    """The CSRF token the sign-in page gives this client (kept in its cookies too)."""
    await http.get("/ui/login")
    return str(http.cookies[CSRF_COOKIE])


async def console_cookies(base: str, token: str) -> dict[str, str]:
    """A signed-in console session's cookies, from the sign-in form."""
    async with httpx.AsyncClient(base_url=base) as http:
        csrf = await login_csrf(http)
        answer = await http.post("/ui/login", data={"token": token, "csrf": csrf})
        assert answer.status_code == 303, answer.text
        return {CSRF_COOKIE: csrf, SESSION_COOKIE: str(http.cookies[SESSION_COOKIE])}


async def session_csrf(http: httpx.AsyncClient) -> str:
    """The CSRF token a signed-in page's forms carry (the session's own, not the cookie's)."""
    page = (await http.get("/ui/jobs")).text
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, page[:500]
    return found.group(1)
