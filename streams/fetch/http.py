"""The bounded HTTP fetcher: guarded addresses, manual redirects, byte caps, one wall-clock deadline.

Whatever an origin does ends in a `FetchResult` with a failure code: nothing it sends can raise
out of `fetch`. httpx's timeouts are per phase, so the whole fetch (every redirect hop and the
body) also runs under one `asyncio.timeout`. Errors are translated in `error_code`.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass, replace
from datetime import datetime
from urllib.parse import urljoin

import httpcore
import httpx

from projections.lifecycle.identity import Rejection, canonicalize
from projections.lifecycle.limits import MAX_URL_BYTES, clip, utf8_len
from projections.lifecycle.outcomes import local_failure, status_failure
from schemas.enums import AttemptOutcome
from schemas.records import Failure, Request
from streams.clock import utc_now
from streams.fetch.addresses import IPNetwork
from streams.fetch.decoding import ACCEPT_ENCODING, BoundedDecoder, DecodingRefusedError
from streams.fetch.guard import AddressRefusedError, GuardedBackend, ResolutionError

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_VALIDATOR_BYTES = 1_024
ERROR_CODES: list[tuple[type[BaseException], str]] = [
    (AddressRefusedError, "ADDRESS_REFUSED"),
    (ResolutionError, "DNS_FAILED"),
    (TimeoutError, "TIMEOUT"),
    (httpx.TimeoutException, "TIMEOUT"),
    (ssl.SSLError, "TLS_FAILED"),
    (httpx.ConnectError, "CONNECTION_FAILED"),
    (httpx.RemoteProtocolError, "PROTOCOL_ERROR"),
    (httpx.LocalProtocolError, "PROTOCOL_ERROR"),
    (httpx.DecodingError, "DECODING_FAILED"),
    (httpx.UnsupportedProtocol, "INVALID_URL"),
    (httpx.InvalidURL, "INVALID_URL"),
    (UnicodeError, "INVALID_URL"),
    (httpx.TransportError, "CONNECTION_FAILED"),
    (OSError, "CONNECTION_FAILED"),
]


class FetchRefusedError(Exception):
    """The fetch stopped by rule (size, redirect); `code` is its failure code."""

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
    """Sends through the transport itself: no client-side redirect handling, no cookie jar shared by jobs."""

    def __init__(
        self,
        limits: FetchLimits,
        allow_private: bool,
        allowed_networks: tuple[IPNetwork, ...] = (),
        user_agent: str = "scrapestream/0.1",
    ) -> None:
        self._limits = limits
        self._transport = GuardedTransport(allow_private, allowed_networks)
        self._headers = {"user-agent": user_agent, "accept-encoding": ACCEPT_ENCODING}
        self._timeouts = httpx.Timeout(30.0).as_dict()

    async def close(self) -> None:
        await self._transport.aclose()

    async def fetch(
        self, request: Request, deadline_s: float, retry_until: datetime | None = None
    ) -> FetchResult:
        """Fetch within `deadline_s`; a Retry-After is honoured up to `retry_until` (the job deadline)."""
        started = time.monotonic()
        try:
            async with asyncio.timeout(deadline_s):
                result = await self._follow(request, retry_until)
        except (FetchRefusedError, DecodingRefusedError) as exc:
            result = _local(exc.code, str(exc))
        except Exception as exc:  # every other error an origin can cause, typed once, here
            result = _local(error_code(exc), f"{type(exc).__name__}: {exc}")
        return replace(result, elapsed_ms=int((time.monotonic() - started) * 1000))

    async def _follow(self, request: Request, retry_until: datetime | None) -> FetchResult:
        url = request.url
        for _ in range(self._limits.max_redirects + 1):
            headers = self._headers | request.headers
            outgoing = httpx.Request(
                request.method.value, url, headers=headers, extensions={"timeout": self._timeouts}
            )
            response = await self._transport.handle_async_request(outgoing)
            try:
                location = response.headers.get("location")
                if response.status_code not in REDIRECT_STATUSES or not location:
                    return await self._read(response, url, retry_until)
            finally:
                await response.aclose()
            url = _next_hop(url, location)
        raise FetchRefusedError("TOO_MANY_REDIRECTS", f"more than {self._limits.max_redirects} redirects")

    async def _read(self, response: httpx.Response, url: str, retry_until: datetime | None) -> FetchResult:
        limits = self._limits
        declared = response.headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > limits.max_body_bytes:
            raise FetchRefusedError(
                "BODY_TOO_LARGE", f"content-length {declared} exceeds {limits.max_body_bytes}"
            )
        decoder = BoundedDecoder(response.headers.get("content-encoding"), limits.max_decoded_bytes)
        body = bytearray()
        async for chunk in response.aiter_raw():
            if response.num_bytes_downloaded > limits.max_body_bytes:
                raise FetchRefusedError(
                    "BODY_TOO_LARGE", f"more than {limits.max_body_bytes} bytes on the wire"
                )
            body += decoder.feed(chunk)
        body += decoder.flush()
        return _response_result(response, url, bytes(body), utc_now(), retry_until)


def error_code(exc: BaseException) -> str:
    """The failure code of an exception, looking through its causes; FETCH_FAILED when unforeseen."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return "TLS_FAILED"
        seen = seen.__cause__ or seen.__context__
    return next((code for kind, code in ERROR_CODES if isinstance(exc, kind)), "FETCH_FAILED")


def _next_hop(current: str, location: str) -> str:
    try:
        target = urljoin(current, location)
    except ValueError as exc:
        raise FetchRefusedError("INVALID_REDIRECT", f"unparseable location {clip(location, 256)!r}") from exc
    if utf8_len(target) > MAX_URL_BYTES:
        raise FetchRefusedError("INVALID_REDIRECT", f"location is longer than {MAX_URL_BYTES} bytes")
    checked = canonicalize(Request(url=target))
    if isinstance(checked, Rejection):
        raise FetchRefusedError("INVALID_REDIRECT", checked.detail)
    return checked.request.url


def _header(response: httpx.Response, name: str) -> str | None:
    value = response.headers.get(name)
    return value if value is not None and utf8_len(value) <= MAX_VALIDATOR_BYTES else None


def _response_result(
    response: httpx.Response, url: str, body: bytes, now: datetime, retry_until: datetime | None
) -> FetchResult:
    failure = status_failure(response.status_code, response.headers.get("retry-after"), now, retry_until)
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
        content_type=_header(response, "content-type") or "application/octet-stream",
        wire_bytes=response.num_bytes_downloaded,
        etag=_header(response, "etag"),
        last_modified=_header(response, "last-modified"),
    )


def _local(code: str, detail: str) -> FetchResult:
    outcome, failure = local_failure(code, detail)
    return FetchResult(outcome=outcome, failure=failure)
