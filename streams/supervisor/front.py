"""The worker's one HTTP port: `/healthz`, `/readyz`, `/metrics` and `/processes` speak for every process;
each other request goes to a serving process in turn (which sends a job's to its owner, as any worker
does), streamed both ways."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from streams.supervisor import merge
from streams.supervisor.children import WorkerProcess, WorkerProcesses
from streams.web.fastpath import Receive, Scope, Send

ASK_TIMEOUT_S = 5.0
HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding", b"upgrade"}
)
BODY_HEADERS = (b"content-length", b"transfer-encoding")
JSON = [(b"content-type", b"application/json")]


class Front:
    def __init__(self, children: WorkerProcesses) -> None:
        self._children = children
        self._turns = itertools.count()
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=ASK_TIMEOUT_S)
            self._session = aiohttp.ClientSession(timeout=timeout, auto_decompress=False)
        return self._session

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if method == "GET" and path in ("/healthz", "/readyz"):
            await self._probe(path, send)
        elif method == "GET" and path in ("/metrics", "/processes"):
            await self._for_all(scope, path, send)
        else:
            await self._pass(scope, receive, send)

    def views(self) -> list[dict[str, Any]]:
        return [child.view() for child in self._children.processes]

    async def _probe(self, path: str, send: Send) -> None:
        answers = await self._ask_each(path)
        if path == "/healthz":
            healthy = {index: _json(body) for index, (status, body) in answers.items() if status == 200}
            status, body = merge.health(healthy, self.views())
        else:
            known = {index: _json(body) for index, (status, body) in answers.items() if status in (200, 503)}
            status, body = merge.readiness(known, self.views())
        await _respond(send, status, JSON, json.dumps(body).encode())

    async def _for_all(self, scope: Scope, path: str, send: Send) -> None:
        """Each process checks the caller (a viewer's token, a peer's signature); the first refusal
        is the answer."""
        answers = await self._ask_each(path, _forwarded_headers(scope), scope.get("query_string", b""))
        for status, body in answers.values():
            if status != 200:
                await _respond(send, status, JSON, body)
                return
        if not answers:
            await _unavailable(send, self.views())
        elif path == "/metrics":
            texts = {index: body.decode() for index, (_, body) in answers.items()}
            headers = [(b"content-type", b"text/plain; version=0.0.4; charset=utf-8")]
            await _respond(send, 200, headers, merge.metrics(texts))
        else:
            await _respond(send, 200, JSON, json.dumps({"processes": self.views()}).encode())

    async def _ask_each(
        self, path: str, headers: list[tuple[str, str]] | None = None, query: bytes = b""
    ) -> dict[int, tuple[int, bytes]]:
        serving = self._children.serving()
        asked = await asyncio.gather(*(self._ask(child, path, headers or [], query) for child in serving))
        pairs = zip(serving, asked, strict=True)
        return {child.index: answer for child, answer in pairs if answer is not None}

    async def _ask(
        self, child: WorkerProcess, path: str, headers: list[tuple[str, str]], query: bytes
    ) -> tuple[int, bytes] | None:
        target = f"{child.url}{path}" + (f"?{query.decode('latin-1')}" if query else "")
        try:
            async with asyncio.timeout(ASK_TIMEOUT_S):
                async with self.session.get(target, headers=headers) as response:
                    return response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError):
            return None

    async def _pass(self, scope: Scope, receive: Receive, send: Send) -> None:
        serving = self._children.serving()
        if not serving:
            await _unavailable(send, self.views())
            return
        child = serving[next(self._turns) % len(serving)]
        raw_path = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string", b"")
        target = f"{child.url}{raw_path.decode('latin-1')}" + (f"?{query.decode('latin-1')}" if query else "")
        has_body = any(name.lower() in BODY_HEADERS for name, _ in scope["headers"])
        started = False
        try:
            async with self.session.request(
                scope["method"],
                target,
                headers=_forwarded_headers(scope),
                data=_body(receive) if has_body else None,
                allow_redirects=False,
            ) as response:
                headers = [
                    (name, value) for name, value in response.raw_headers if name.lower() not in HOP_BY_HOP
                ]
                await send({"type": "http.response.start", "status": response.status, "headers": headers})
                started = True
                async for chunk in response.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except aiohttp.ClientError:
            if started:  # the process went away mid-answer: end the body it had begun
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            else:
                await _unavailable(send, self.views())


def _forwarded_headers(scope: Scope) -> list[tuple[str, str]]:
    return [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in scope["headers"]
        if name.lower() not in HOP_BY_HOP
    ]


async def _body(receive: Receive) -> AsyncIterator[bytes]:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


def _json(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def _unavailable(send: Send, processes: list[dict[str, Any]]) -> None:
    states = ", ".join(f"process {view['index']} {view['state']}" for view in processes)
    body = {"code": "unavailable", "message": f"no worker process is serving now ({states}); try again"}
    await _respond(send, 503, [*JSON, (b"retry-after", b"1")], json.dumps(body).encode())


async def _respond(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
