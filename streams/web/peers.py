"""Talking to the other workers: forward a request to a job's owner, read a shard of a listing.

A request forwarded to a job's owner is the caller's own public request: its `Authorization`
travels with it, so the owner authenticates the same principal, and it is answered where it lands,
never forwarded again. The internal routes (`/_shard/...`) answer peers only: those requests carry
a peer credential (`streams.auth.peering`) naming the caller this worker authenticated, never the
caller's token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, TypeVar
from urllib.parse import urlencode

import aiohttp
from fastapi import Request, Response
from pydantic import BaseModel, ValidationError
from yarl import URL

from schemas.enums import ActorRole
from streams.auth.peering import PeerKey
from streams.auth.principals import Principal
from streams.clock import utc_now
from streams.web.errors import ApiError

FORWARDED_HEADER = "scrapestream-forwarded"
PASSED_HEADERS = ("authorization", "content-type", "x-request-id", "traceparent", "tracestate")
CHUNK_BYTES = 256 * 1024
WORKER = Principal("scrapestream-worker", ActorRole.VIEWER)  # who a worker is when it tells its peers
M = TypeVar("M", bound=BaseModel)


class Peers:
    def __init__(self, timeout_s: float, key: PeerKey | None = None) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._key = key
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout, auto_decompress=False)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    @staticmethod
    def is_forwarded(request: Request) -> bool:
        return FORWARDED_HEADER in request.headers

    async def forward(self, owner: str, request: Request) -> Response:
        """The owner's answer to the same request, relayed as it came."""
        url = f"{owner}{request.url.path}"
        body = await request.body()
        try:
            async with self._client().request(
                request.method,
                url,
                params=request.query_params.multi_items(),
                data=body or None,
                headers=_passed(request),
            ) as answer:
                content = await answer.read()
                return Response(content, answer.status, _relayed(answer.headers))
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _unreachable(owner, exc) from exc

    async def shard(
        self, peer: str, path: str, params: Mapping[str, Any], principal: Principal, model: type[M]
    ) -> M:
        """A peer's answer to an internal shard route, as `model`; every failure is this API's error."""
        pairs = _present(params)
        target = f"{path}?{urlencode(pairs)}" if pairs else path
        try:
            async with self._client().get(
                URL(f"{peer}{target}", encoded=True), headers=self._credential(target, principal)
            ) as answer:
                document = await answer.json(content_type=None)
                if answer.status != 200:
                    raise _relayed_error(peer, answer.status, document)
                return model.model_validate(document)
        except ValidationError as exc:
            raise ApiError(503, "unavailable", f"worker {peer} answered with an unusable {path}") from exc
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise _unreachable(peer, exc) from exc

    async def open_stream(self, peer: str, path: str, principal: Principal) -> aiohttp.ClientResponse | None:
        """A peer's streaming answer (the caller releases it), or None when the peer does not have it."""
        try:
            answer = await self._client().get(
                URL(f"{peer}{path}", encoded=True), headers=self._credential(path, principal)
            )
        except (aiohttp.ClientError, TimeoutError):
            return None
        if answer.status != 200:
            answer.release()
            return None
        return answer

    async def tell(self, peer: str, target: str) -> bool:
        """POSTs an internal route of a peer's, as this worker; whether it took it."""
        headers = self._credential(target, WORKER, "POST")
        try:
            async with self._client().post(URL(f"{peer}{target}", encoded=True), headers=headers) as answer:
                return answer.status < 300
        except (aiohttp.ClientError, TimeoutError):
            return False

    def _credential(self, target: str, principal: Principal, method: str = "GET") -> dict[str, str]:
        """A peer request's headers: the peer credential for `principal` (none with auth off)."""
        headers = {FORWARDED_HEADER: "1"}
        if self._key is not None:
            headers |= self._key.headers(method, target, principal, int(utc_now().timestamp()))
        return headers


async def relay(answer: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    try:
        async for chunk in answer.content.iter_chunked(CHUNK_BYTES):
            yield chunk
    finally:
        answer.release()


def _passed(request: Request) -> dict[str, str]:
    headers = {name: request.headers[name] for name in PASSED_HEADERS if name in request.headers}
    headers[FORWARDED_HEADER] = "1"
    return headers


def _present(params: Mapping[str, Any]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for name, value in params.items():
        values = value if isinstance(value, list | tuple | frozenset) else [value]
        pairs.extend((name, str(item)) for item in values if item is not None)
    return pairs


def _relayed(headers: Mapping[str, str]) -> dict[str, str]:
    kept = ("content-type", "www-authenticate", "retry-after")
    return {name: headers[name] for name in kept if name in headers}


def _relayed_error(peer: str, status: int, document: Any) -> ApiError:
    if isinstance(document, dict) and isinstance(document.get("code"), str):
        return ApiError(status, document["code"], str(document.get("message", "")))
    return ApiError(503, "unavailable", f"worker {peer} answered {status}")


def _unreachable(peer: str, exc: BaseException) -> ApiError:
    return ApiError(
        503,
        "unavailable",
        f"worker {peer} did not answer ({type(exc).__name__}); retry shortly",
        {"Retry-After": "1"},
    )
