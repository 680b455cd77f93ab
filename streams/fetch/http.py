"""The bounded HTTP fetcher: guarded addresses, manual redirects, byte caps, one wall-clock deadline.

httpx's timeouts are per phase, so the whole fetch (every redirect hop and the body) also
runs under one `asyncio.timeout`. Third-party errors become failure codes in `ERROR_CODES`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from datetime import datetime
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from projections.lifecycle.outcomes import local_failure, status_failure
from schemas.enums import AttemptOutcome
from schemas.records import Failure, Request
from streams.clock import utc_now
from streams.fetch.guard import AddressRefusedError, GuardedBackend, IPNetwork, ResolutionError

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
ERROR_CODES: list[tuple[type[BaseException], str]] = [
    (AddressRefusedError, "ADDRESS_REFUSED"),
    (ResolutionError, "DNS_FAILED"),
    (TimeoutError, "TIMEOUT"),
    (httpx.TimeoutException, "TIMEOUT"),
    (httpx.ConnectError, "CONNECTION_FAILED"),
    (httpx.RemoteProtocolError, "PROTOCOL_ERROR"),
    (httpx.DecodingError, "PROTOCOL_ERROR"),
    (httpx.TransportError, "CONNECTION_FAILED"),
]


class BodyTooLargeError(Exception):
    """The response passed a byte cap."""


class RedirectError(Exception):
    """A redirect that may not be followed; `code` is its failure code."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


@dataclass(frozen=True)
class FetchLimits:
    max_body_bytes: int
    max_decoded_bytes: int
    max_redirects: int


@dataclass(frozen=True)
class FetchResult:
    outcome: AttemptOutcome
    failure: Failure | None
    http_status: int | None = None
    final_url: str | None = None
    body: bytes = b""
    content_type: str = "application/octet-stream"
    wire_bytes: int = 0
    elapsed_ms: int = 0
    etag: str | None = None
    last_modified: str | None = None


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool whose network backend is the address guard."""

    def __init__(
        self, allow_private: bool, allowed_networks: tuple[IPNetwork, ...] = (), max_connections: int = 100
    ) -> None:
        super().__init__()
        # httpx takes no network backend, so its pool is replaced once, here.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=max_connections,
            max_keepalive_connections=max_connections // 2,
            keepalive_expiry=5.0,
            network_backend=GuardedBackend(allow_private, allowed_networks),
        )


class HttpFetcher:
    def __init__(
        self,
        limits: FetchLimits,
        allow_private: bool,
        allowed_networks: tuple[IPNetwork, ...] = (),
        user_agent: str = "scrapestream/0.1",
    ) -> None:
        self._limits = limits
        self._client = httpx.AsyncClient(
            transport=GuardedTransport(allow_private, allowed_networks),
            follow_redirects=False,
            timeout=httpx.Timeout(30.0),
            headers={"user-agent": user_agent},
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def fetch(self, request: Request, deadline_s: float) -> FetchResult:
        started = time.monotonic()
        try:
            async with asyncio.timeout(deadline_s):
                result = await self._follow(request)
        except BodyTooLargeError as exc:
            result = _local("BODY_TOO_LARGE", str(exc))
        except RedirectError as exc:
            result = _local(exc.code, str(exc))
        except Exception as exc:
            code = next((code for kind, code in ERROR_CODES if isinstance(exc, kind)), None)
            if code is None:
                raise
            result = _local(code, str(exc) or type(exc).__name__)
        elapsed_ms = int((time.monotonic() - started) * 1000)
        return replace(result, elapsed_ms=elapsed_ms)

    async def _follow(self, request: Request) -> FetchResult:
        url = request.url
        for _ in range(self._limits.max_redirects + 1):
            outgoing = self._client.build_request(request.method.value, url, headers=request.headers)
            response = await self._client.send(outgoing, stream=True)
            try:
                location = response.headers.get("location")
                if response.status_code not in REDIRECT_STATUSES or not location:
                    return await self._read(response, url)
            finally:
                await response.aclose()
            url = _next_hop(url, location)
        raise RedirectError("TOO_MANY_REDIRECTS", f"more than {self._limits.max_redirects} redirects")

    async def _read(self, response: httpx.Response, url: str) -> FetchResult:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._limits.max_body_bytes:
            raise BodyTooLargeError(f"content-length {declared} exceeds {self._limits.max_body_bytes} bytes")
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body.extend(chunk)
            if response.num_bytes_downloaded > self._limits.max_body_bytes:
                raise BodyTooLargeError(f"more than {self._limits.max_body_bytes} bytes on the wire")
            if len(body) > self._limits.max_decoded_bytes:
                raise BodyTooLargeError(f"more than {self._limits.max_decoded_bytes} bytes decoded")
        return _response_result(response, url, bytes(body), utc_now())


def _next_hop(current: str, location: str) -> str:
    target = urljoin(current, location)
    if urlsplit(target).scheme not in ("http", "https"):
        raise RedirectError("INVALID_REDIRECT", f"redirect to {target!r}")
    return target


def _response_result(response: httpx.Response, url: str, body: bytes, now: datetime) -> FetchResult:
    failure = status_failure(response.status_code, response.headers.get("retry-after"), now)
    if failure is None:
        outcome = AttemptOutcome.NOT_MODIFIED if response.status_code == 304 else AttemptOutcome.FETCHED
    else:
        outcome = AttemptOutcome.HTTP_ERROR
    return FetchResult(
        outcome=outcome,
        failure=failure,
        http_status=response.status_code,
        final_url=url,
        body=body if failure is None else b"",
        content_type=response.headers.get("content-type", "application/octet-stream"),
        wire_bytes=response.num_bytes_downloaded,
        etag=response.headers.get("etag"),
        last_modified=response.headers.get("last-modified"),
    )


def _local(code: str, detail: str) -> FetchResult:
    outcome, failure = local_failure(code, detail)
    return FetchResult(outcome=outcome, failure=failure)
