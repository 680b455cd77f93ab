"""Talking to the other workers: forward a request to a job's owner, read a shard of a listing.

The caller's own `Authorization` travels with every hop, so each worker authenticates the same
principal; a forwarded request is answered where it lands, never forwarded again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, TypeVar

import aiohttp
from fastapi import Request, Response
from pydantic import BaseModel, ValidationError

from streams.web.errors import ApiError

FORWARDED_HEADER = "scrapestream-forwarded"
PASSED_HEADERS = ("authorization", "content-type", "x-request-id")
CHUNK_BYTES = 256 * 1024
M = TypeVar("M", bound=BaseModel)


class Peers:
    def __init__(self, timeout_s: float) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
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
        self, peer: str, path: str, params: Mapping[str, Any], request: Request, model: type[M]
    ) -> M:
        """A peer's answer to an internal shard route, as `model`; every failure is this API's error."""
        try:
            async with self._client().get(
                f"{peer}{path}", params=_present(params), headers=_passed(request)
            ) as answer:
                document = await answer.json(content_type=None)
                if answer.status != 200:
                    raise _relayed_error(peer, answer.status, document)
                return model.model_validate(document)
        except ValidationError as exc:
            raise ApiError(503, "unavailable", f"worker {peer} answered with an unusable {path}") from exc
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise _unreachable(peer, exc) from exc

    async def open_stream(self, peer: str, path: str, request: Request) -> aiohttp.ClientResponse | None:
        """A peer's streaming answer (the caller releases it), or None when the peer does not have it."""
        try:
            answer = await self._client().get(f"{peer}{path}", headers=_passed(request))
        except (aiohttp.ClientError, TimeoutError):
            return None
        if answer.status != 200:
            answer.release()
            return None
        return answer


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
