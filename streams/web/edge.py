"""The first thing every request meets: who is asking, and how much it may send, before any body is read.

A request that must be authenticated and is not is answered 401 without one byte of its body read;
a body larger than its route allows, by its declared length or by what arrives, is answered 413 as
soon as that is known. What passes is read whole (it is at most the limit) and handed on.
"""

from __future__ import annotations

import json

from streams.auth.peering import PeerKey
from streams.auth.principals import Principals
from streams.web.fastpath import Asgi, Message, Receive, Scope, Send
from streams.web.sessions import ConsoleSessions

CONSOLE = "/ui"
CONSOLE_SIGN_IN = ("/ui/login", "/ui/logout")
CONSOLE_BODY_BYTES = 64 * 1024
PUBLIC = ("/healthz", "/readyz", "/docs", "/docs-assets/", "/openapi.json", "/ui/static/")
PEER_ROUTES = "/_shard/"
UPLOADS = "/uploads/"  # signed by the URL itself; streamed and bounded by its handler
INTERNAL_HEADERS = (b"x-scrapestream-console",)  # only the console's in-process calls may carry it


def _problem(status: int, code: str, message: str, headers: list[tuple[bytes, bytes]]) -> list[Message]:
    body = json.dumps({"code": code, "message": message}).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return [
        {"type": "http.response.start", "status": status, "headers": head + headers},
        {"type": "http.response.body", "body": body},
    ]


class EdgeGuard:
    def __init__(
        self,
        app: Asgi,
        principals: Principals | None,
        sessions: ConsoleSessions,
        peer_key: PeerKey | None,
        max_body_bytes: int,
        max_upload_bytes: int,
    ) -> None:
        self._app = app
        self._principals = principals
        self._sessions = sessions
        self._peer_key = peer_key
        self._max_body_bytes = max_body_bytes
        self._max_upload_bytes = max_upload_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        scope["headers"] = [(name, value) for name, value in scope["headers"] if name not in INTERNAL_HEADERS]
        path: str = scope["path"]
        refusal = self._unauthenticated(path, scope)
        if refusal is not None and _carries_body(scope):
            for message in _problem(401, *refusal):
                await send(message)
            return
        limit = CONSOLE_BODY_BYTES if path.startswith(CONSOLE) else self._max_body_bytes
        limit = self._max_upload_bytes if path.startswith(UPLOADS) else limit
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _too_large(send, limit)
            return
        if not _carries_body(scope) or path.startswith(UPLOADS):
            await self._app(scope, receive, send)
            return
        body = await _read_within(receive, limit)
        if body is None:
            await _too_large(send, limit)
            return
        await self._app(scope, _replaying(body, receive), send)

    def _unauthenticated(self, path: str, scope: Scope) -> tuple[str, str, list[tuple[bytes, bytes]]] | None:
        """Why this request may not be handed a body: None when it needs no principal, or has one."""
        if self._principals is None or path.startswith((*PUBLIC, UPLOADS)) or path in CONSOLE_SIGN_IN:
            return None
        headers = dict(scope["headers"])
        if path.startswith(PEER_ROUTES):
            return None if self._peer_key is not None else ("forbidden", "no internal route here", [])
        if path.startswith(CONSOLE):
            cookie = headers.get(b"cookie", b"").decode("latin-1")
            if self._sessions.from_cookie_header(cookie) is not None:
                return None
            return ("unauthenticated", "sign in to the console first", [])
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        if scheme.lower() == "bearer" and self._principals.by_token(token.strip()) is not None:
            return None
        return (
            "unauthenticated",
            "this API needs a bearer token: send `Authorization: Bearer <token>`",
            [(b"www-authenticate", b"Bearer")],
        )


def _carries_body(scope: Scope) -> bool:
    headers = dict(scope["headers"])
    length = _declared_length(scope)
    return (length is not None and length > 0) or b"transfer-encoding" in headers


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
    return None


async def _read_within(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None as soon as more than `limit` bytes have arrived."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()  # a disconnect, when it comes
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _too_large(send: Send, limit: int) -> None:
    message = f"the request body is larger than this route takes ({limit} bytes)"
    for part in _problem(413, "too_large", message, [(b"connection", b"close")]):
        await send(part)
