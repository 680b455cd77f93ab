"""The bounded HTTP fetcher: guarded addresses, manual redirects, byte caps, one wall-clock deadline.

It speaks aiohttp directly, over a session whose resolver and connector enforce the address guard
(`guard.guarded_session`): here httpx costs ~10 times more CPU per request on its own transport and
twice as much on aiohttp's (docs/PERFORMANCE.md). Whatever an origin does ends in a `FetchResult`
with a failure code: nothing it sends can raise out of `fetch`. The whole fetch (every redirect
hop and the body) runs under one `asyncio.timeout`. Errors are translated by `classify`, looking
through the chain of causes for the most specific one. Every result, a failed one too, counts the
bytes that crossed the wire (each hop's status line and headers, and what was read of bodies), so
a metered route is charged for what it carried whatever the outcome.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from urllib.parse import urljoin, urlsplit

import aiohttp
from yarl import URL

from projections.lifecycle.cache import NEGATIVE_STATUSES, ResponseCaps
from projections.lifecycle.freshness import (
    CACHE_HEADERS,
    NOT_STORABLE,
    request_allows_store,
    response_freshness,
)
from projections.lifecycle.identity import Rejection, canonicalize
from projections.lifecycle.limits import MAX_URL_BYTES, clip, utf8_len
from projections.lifecycle.outcomes import local_failure, status_failure
from schemas.enums import AttemptOutcome
from schemas.records import Failure, Request
from streams.clock import utc_now
from streams.fetch.addresses import IPNetwork
from streams.fetch.decoding import ACCEPT_ENCODING, BoundedDecoder, DecodingRefusedError
from streams.fetch.guard import (
    AddressPolicy,
    AddressRefusedError,
    ResolutionError,
    guarded_session,
    resolve_checked,
)
from streams.settings import ResponseLimits

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
NOT_MODIFIED = 304
MAX_VALIDATOR_BYTES = 1_024
MIN_DEADLINE_S = 1.0
ERROR_CODES: list[tuple[type[BaseException], str]] = [
    (AddressRefusedError, "ADDRESS_REFUSED"),
    (ResolutionError, "DNS_FAILED"),
    (aiohttp.ClientConnectorDNSError, "DNS_FAILED"),
    (socket.gaierror, "DNS_FAILED"),
    (ssl.SSLError, "TLS_FAILED"),
    (aiohttp.ClientSSLError, "TLS_FAILED"),
    (ConnectionResetError, "CONNECTION_RESET"),
    (aiohttp.ServerTimeoutError, "TIMEOUT"),
    (aiohttp.ServerDisconnectedError, "PROTOCOL_ERROR"),
    (aiohttp.ClientPayloadError, "PROTOCOL_ERROR"),
    (aiohttp.ClientResponseError, "PROTOCOL_ERROR"),
    (aiohttp.InvalidURL, "INVALID_URL"),
    (aiohttp.ClientConnectionError, "CONNECTION_FAILED"),
    (TimeoutError, "TIMEOUT"),
    (UnicodeError, "INVALID_URL"),
    (ValueError, "INVALID_URL"),
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

    @classmethod
    def of(cls, policy_class: ResponseLimits) -> FetchLimits:
        return cls(policy_class.max_body_bytes, policy_class.max_decoded_bytes, policy_class.max_redirects)


def call_deadline_s(max_runtime_ms: int, limits: ResponseLimits) -> float:
    """How long one call may take: the policy class's timeout within the job type's runtime (if it
    has a ceiling: `0` has none)."""
    if max_runtime_ms == 0:
        return max(limits.timeout_s, MIN_DEADLINE_S)
    return max(min(max_runtime_ms / 1000, limits.timeout_s), MIN_DEADLINE_S)


class _Meter:
    """Bytes received and requests sent over one fetch, kept whatever ends it."""

    def __init__(self) -> None:
        self.received = 0
        self.requests = 0

    def head(self, response: aiohttp.ClientResponse) -> None:
        status_line = 15 + len(response.reason or "")
        self.received += (
            status_line + sum(len(name) + len(value) + 4 for name, value in response.raw_headers) + 2
        )


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
    storable: bool = True
    fresh_for_ms: int | None = None
    must_revalidate: bool = False
    requests: int = 0  # sent to the origin: each redirect hop counts


class HttpFetcher:
    """Follows redirects itself (each hop checked again); no cookie is kept between jobs."""

    def __init__(
        self,
        limits: FetchLimits,
        allow_private: bool,
        allowed_networks: tuple[IPNetwork, ...] = (),
        user_agent: str = "scrapestream/0.1",
        connections: int = 100,
    ) -> None:
        self._limits = limits
        self._policy = AddressPolicy(allow_private, allowed_networks)
        self._session = guarded_session(self._policy, connections)
        self._connections = connections
        self._proxied: aiohttp.ClientSession | None = None
        self._headers = {"user-agent": user_agent, "accept-encoding": ACCEPT_ENCODING}

    async def close(self) -> None:
        await self._session.close()
        if self._proxied is not None:
            await self._proxied.close()

    async def fetch(
        self,
        request: Request,
        deadline_s: float,
        retry_until: datetime | None = None,
        validators: Mapping[str, str] | None = None,
        limits: FetchLimits | None = None,
        proxy: str | None = None,
        credential: Mapping[str, str] | None = None,
    ) -> FetchResult:
        """Fetch within `deadline_s`; a Retry-After is honoured up to `retry_until` (the job deadline).

        `validators` (`If-None-Match`, `If-Modified-Since`) make the request conditional; `limits`
        (the job's policy class) replace the fetcher's own. Through a `proxy` (a route's), the
        proxy connects to the origin: each hop's address is checked here before it is asked. A
        `credential`'s headers go to the request's own origin only, never to a redirect elsewhere.
        """
        started = time.monotonic()
        meter = _Meter()
        try:
            async with asyncio.timeout(deadline_s):
                result = await self._follow(
                    request,
                    retry_until,
                    validators or {},
                    limits or self._limits,
                    proxy,
                    meter,
                    credential or {},
                )
        except (FetchRefusedError, DecodingRefusedError) as exc:
            result = local_result(exc.code, str(exc))
        except Exception as exc:  # every other error an origin can cause, typed once, here
            result = local_result(*classify(exc))
        elapsed_ms = int((time.monotonic() - started) * 1000)
        storable = result.storable and request_allows_store(request.headers)
        return replace(
            result,
            elapsed_ms=elapsed_ms,
            wire_bytes=meter.received,
            storable=storable,
            requests=meter.requests,
        )

    async def _follow(
        self,
        request: Request,
        retry_until: datetime | None,
        validators: Mapping[str, str],
        limits: FetchLimits,
        proxy: str | None,
        meter: _Meter,
        credential: Mapping[str, str],
    ) -> FetchResult:
        url = request.url
        own_origin = _origin(url)
        headers = self._headers | request.headers | dict(validators)
        session = self._session if proxy is None else await self._through(proxy, url)
        for hop in range(limits.max_redirects + 1):
            if proxy is not None and hop:
                await self._through(proxy, url)
            meter.requests += 1
            sent = headers | dict(credential) if credential and _origin(url) == own_origin else headers
            async with session.request(
                request.method.value, url, headers=sent, allow_redirects=False, proxy=proxy
            ) as response:
                meter.head(response)
                location = response.headers.get("location")
                if response.status not in REDIRECT_STATUSES or not location:
                    return await self._read(response, url, retry_until, limits, meter)
            url = _next_hop(url, location)
        raise FetchRefusedError("TOO_MANY_REDIRECTS", f"more than {limits.max_redirects} redirects")

    async def _through(self, proxy: str, url: str) -> aiohttp.ClientSession:
        """The session for proxied requests, once `url`'s host is checked; the proxy itself is the
        deployment's own and is not checked."""
        parts = URL(url)
        host = parts.raw_host or ""
        if not self._policy.allow_private:
            await resolve_checked(host, parts.port or 80, False, self._policy.allowed_networks)
        if self._proxied is None:
            connector = aiohttp.TCPConnector(limit=self._connections, ssl=ssl.create_default_context())
            self._proxied = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False,
                skip_auto_headers=("User-Agent",),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=None),
            )
        return self._proxied

    async def _read(
        self,
        response: aiohttp.ClientResponse,
        url: str,
        retry_until: datetime | None,
        limits: FetchLimits,
        meter: _Meter,
    ) -> FetchResult:
        declared = response.headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > limits.max_body_bytes:
            raise FetchRefusedError(
                "BODY_TOO_LARGE", f"content-length {declared} exceeds {limits.max_body_bytes}"
            )
        decoder = BoundedDecoder(response.headers.get("content-encoding"), limits.max_decoded_bytes)
        body = bytearray()
        wire_bytes = 0
        async for chunk in response.content.iter_any():
            wire_bytes += len(chunk)
            meter.received += len(chunk)
            if wire_bytes > limits.max_body_bytes:
                raise FetchRefusedError(
                    "BODY_TOO_LARGE", f"more than {limits.max_body_bytes} bytes on the wire"
                )
            body += decoder.feed(chunk)
        body += decoder.flush()
        return _response_result(response, url, bytes(body), wire_bytes, utc_now(), retry_until)


def classify(exc: BaseException) -> tuple[str, str]:
    """The code of the first `ERROR_CODES` entry matching the exception or one of its causes, and
    a description of that cause; `FETCH_FAILED` and the exception itself when none matches."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for kind, code in ERROR_CODES:
        cause = next((cause for cause in chain if isinstance(cause, kind)), None)
        if cause is not None:
            return code, f"{type(cause).__name__}: {cause}"
    return "FETCH_FAILED", f"{type(exc).__name__}: {exc}"


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


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


def _header(response: aiohttp.ClientResponse, name: str) -> str | None:
    value = response.headers.get(name)
    return value if value is not None and utf8_len(value) <= MAX_VALIDATOR_BYTES else None


def _response_result(
    response: aiohttp.ClientResponse,
    url: str,
    body: bytes,
    wire_bytes: int,
    now: datetime,
    retry_until: datetime | None,
) -> FetchResult:
    failure = status_failure(response.status, response.headers.get("retry-after"), now, retry_until)
    outcome = AttemptOutcome.FETCHED if failure is None else AttemptOutcome.HTTP_ERROR
    # A 304's headers freshen the stored 200 it confirms (RFC 9111 4.3.4): judged as that response.
    judged_status = 200 if response.status == NOT_MODIFIED else response.status
    cacheable = failure is None or response.status in NEGATIVE_STATUSES or response.status == NOT_MODIFIED
    caching = {
        name: ", ".join(response.headers.getall(name)) for name in CACHE_HEADERS if name in response.headers
    }
    fresh = response_freshness(judged_status, caching, now) if cacheable else NOT_STORABLE
    return FetchResult(
        outcome=outcome,
        failure=failure,
        http_status=response.status,
        final_url=url,
        body=body if failure is None else b"",
        content_type=_header(response, "content-type") or "application/octet-stream",
        wire_bytes=wire_bytes,
        etag=_header(response, "etag"),
        last_modified=_header(response, "last-modified"),
        storable=fresh.storable,
        fresh_for_ms=fresh.fresh_for_ms,
        must_revalidate=fresh.must_revalidate,
    )


def local_result(code: str, detail: str) -> FetchResult:
    """A fetch that ended on this side of the wire, by its code in `LOCAL_FAILURES`."""
    outcome, failure = local_failure(code, detail)
    return FetchResult(outcome=outcome, failure=failure)


def caps_of(limits: ResponseLimits) -> ResponseCaps:
    """A policy class's response limits as the response cache's rules read them."""
    return ResponseCaps(limits.max_body_bytes, limits.max_decoded_bytes)
