"""One try at delivering a terminal outcome: a signed POST, bounded in time and bytes, never redirected.

Retries are not made here: the lifecycle schedules the next try as an event, so it survives a
restart and a slow receiver holds one slot for at most one try's timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import msgspec

from projections.lifecycle.limits import clip
from schemas.work import CallbackDue
from streams.callbacks.keys import CallbackKeys
from streams.callbacks.signing import signature_headers
from streams.fetch.addresses import IPNetwork
from streams.fetch.guard import AddressPolicy, AddressRefusedError, guarded_session
from streams.fetch.http import classify
from streams.runtime.trace_context import TraceContext

MAX_RESPONSE_BYTES = 64 * 1024


@dataclass(frozen=True)
class TryResult:
    delivered: bool
    http_status: int | None
    error: str | None
    retryable: bool


class CallbackSender:
    def __init__(
        self,
        keys: CallbackKeys | None,
        allow_private: bool,
        allowed_networks: tuple[IPNetwork, ...],
        timeout_s: float,
        clock: Callable[[], datetime],
    ) -> None:
        self._keys = keys
        self._timeout_s = timeout_s
        self._clock = clock
        self._session = guarded_session(AddressPolicy(allow_private, allowed_networks), connections=100)

    async def close(self) -> None:
        await self._session.close()

    async def attempt(self, due: CallbackDue, trace: TraceContext | None = None) -> TryResult:
        """One try; the receiver's request carries `trace` (W3C headers) to join the job's trace."""
        payload = due.completion or due.change  # a job's end, or a monitor's change
        if payload is None:
            return TryResult(False, None, "the delivery carries nothing to send", retryable=False)
        body = msgspec.json.encode(payload)
        signing = [] if self._keys is None else self._keys.signing(payload.caller_identity)
        timestamp_s = int(self._clock().timestamp())
        headers = {"content-type": "application/json"}
        headers |= signature_headers(signing, due.webhook_id, timestamp_s, body)
        if trace is not None:
            headers |= {name: value.decode() for name, value in trace.headers()}
        try:
            async with asyncio.timeout(self._timeout_s):
                status = await self._post(due.callback_url, body, headers)
        except AddressRefusedError as exc:
            return TryResult(False, None, f"refused: {exc}", retryable=False)
        except Exception as exc:  # a receiver's failure of any kind is this try's outcome
            code, detail = classify(exc)
            retryable = code not in ("INVALID_URL", "TLS_FAILED")
            return TryResult(False, None, clip(f"{code}: {detail}"), retryable)
        if 200 <= status < 300:
            return TryResult(True, status, None, retryable=False)
        # 410 Gone says the receiver is gone for good; a redirect would bypass the address checks.
        retryable = status != 410 and not 300 <= status < 400
        return TryResult(False, status, f"HTTP {status}", retryable)

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> int:
        """POST and read at most `MAX_RESPONSE_BYTES` of the answer (a receiver cannot hold a slot)."""
        async with self._session.post(url, data=body, headers=headers, allow_redirects=False) as response:
            received = 0
            async for chunk in response.content.iter_any():
                received += len(chunk)
                if received >= MAX_RESPONSE_BYTES:
                    break
            return response.status
