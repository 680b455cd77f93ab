"""The console's way to the API: the same app, called in-process with the session's token."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import Request

from streams.web.console.session import Session
from streams.web.context import request_id
from streams.web.sessions import SESSION_HEADER

PREVIEW_BYTES = 64 * 1024


class ConsoleError(Exception):
    """An API refusal, shown as the console's error page with the same status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Artifact:
    content_type: str
    body: bytes
    truncated: bool


class ConsoleApi:
    def __init__(self, request: Request, session: Session) -> None:
        headers = {"X-Request-Id": request_id(request)}
        if session.token is not None:
            headers[SESSION_HEADER] = session.token
        self._client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=request.app), base_url="http://console.local", headers=headers
        )

    async def __aenter__(self) -> ConsoleApi:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._client.aclose()

    async def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return _answer(await self._client.get(path, params=_present(params or {})))

    async def post(self, path: str, body: Mapping[str, Any]) -> Any:
        return _answer(await self._client.post(path, json=dict(body)))

    async def artifact(self, path: str, limit: int = PREVIEW_BYTES) -> Artifact:
        """The first `limit` bytes of an artifact the session may download from the API's `path`
        (`/artifacts/{id}`, a visual change's difference; audited as by the API)."""
        async with self._client.stream("GET", path) as response:
            if response.status_code != 200:
                await response.aread()
                _answer(response)
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    break
            content_type = response.headers.get("content-type", "application/octet-stream")
        return Artifact(content_type, bytes(body[:limit]), len(body) > limit)


def _present(params: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in params.items() if value not in (None, "", [])}


def _answer(response: httpx.Response) -> Any:
    if response.status_code < 300:
        is_json = response.headers.get("content-type", "").startswith("application/json")
        return response.json() if is_json else {}
    try:
        message = str(response.json().get("message", response.text))
    except ValueError:
        message = response.text
    raise ConsoleError(response.status_code, message)
