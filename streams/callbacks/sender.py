"""Delivers a terminal outcome: signed POST, no redirects, retried with backoff for a bounded time."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import httpx

from schemas.work import CallbackDue
from streams.callbacks.signing import signature_headers
from streams.fetch.guard import AddressRefusedError, IPNetwork, ResolutionError
from streams.fetch.http import GuardedTransport

log = logging.getLogger(__name__)
MAX_BACKOFF_S = 60.0


@dataclass(frozen=True)
class Delivery:
    delivered: bool
    attempts: int
    http_status: int | None
    last_error: str | None


class CallbackSender:
    def __init__(
        self,
        secret: str | None,
        allow_private: bool,
        allowed_networks: tuple[IPNetwork, ...],
        max_elapsed_s: float,
        retry_base_s: float,
        timeout_s: float,
        clock: Callable[[], datetime],
    ) -> None:
        self._secret = secret
        self._max_elapsed_s = max_elapsed_s
        self._retry_base_s = retry_base_s
        self._clock = clock
        self._client = httpx.AsyncClient(
            transport=GuardedTransport(allow_private),
            follow_redirects=False,
            timeout=httpx.Timeout(timeout_s),
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def deliver(self, due: CallbackDue) -> Delivery:
        body = due.completion.model_dump_json().encode()
        give_up_at = time.monotonic() + self._max_elapsed_s
        attempts, status, error = 0, None, None
        while True:
            attempts += 1
            status, error = await self._post(due, body)
            if status is not None and 200 <= status < 300:
                return Delivery(True, attempts, status, None)
            if error is not None and error.startswith("refused"):
                break
            delay = min(self._retry_base_s * 2 ** (attempts - 1), MAX_BACKOFF_S)
            if time.monotonic() + delay > give_up_at:
                break
            await asyncio.sleep(delay)
        log.warning("callback for job %s abandoned after %d attempts: %s", due.job_id, attempts, error)
        return Delivery(False, attempts, status, error)

    async def _post(self, due: CallbackDue, body: bytes) -> tuple[int | None, str | None]:
        headers = {"content-type": "application/json"}
        if self._secret is not None:
            timestamp_s = int(self._clock().timestamp())
            headers |= signature_headers(self._secret, due.webhook_id, timestamp_s, body)
        try:
            response = await self._client.post(due.callback_url, content=body, headers=headers)
        except (AddressRefusedError, ResolutionError) as exc:
            return None, f"refused: {exc}"
        except httpx.HTTPError as exc:
            return None, f"{type(exc).__name__}: {exc}"
        if 200 <= response.status_code < 300:
            return response.status_code, None
        return response.status_code, f"HTTP {response.status_code}"
