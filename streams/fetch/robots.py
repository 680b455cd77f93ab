"""robots.txt compliance (RFC 9309), for the policy classes that ask for it.

Each origin's robots.txt is fetched once (through the host's politeness, as any request) and
kept for a day; one fetch serves every job that asks meanwhile. A 4xx means no rules; a 2xx is
parsed with Protego (wildcards, `$`, the longest match wins); a 5xx, 429 or a failed fetch means
the rules are unknown: the job is denied for now (`ROBOTS_UNAVAILABLE`, retried later) and the
failure is kept for five minutes, so an origin that is down is not asked again for each job.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from urllib.parse import urlsplit

from protego import Protego

from schemas.records import Request
from streams.fetch.http import FetchLimits, FetchResult

RULES_KEPT_S = 86_400.0
FAILURE_KEPT_S = 300.0
ROBOTS_LIMITS = FetchLimits(max_body_bytes=512 * 1024, max_decoded_bytes=512 * 1024, max_redirects=5)
ROBOTS_TIMEOUT_S = 10.0
MAX_ORIGINS = 10_000
ROBOTS_NAME = "scrapestream"  # the product token rules are matched against

Fetch = Callable[[Request, float, FetchLimits], Awaitable[FetchResult]]  # request, timeout, limits


class Verdict(Enum):
    """Whether a URL may be fetched; a refusal's value is its failure code."""

    ALLOWED = "ALLOWED"
    DISALLOWED = "ROBOTS_DISALLOWED"
    UNAVAILABLE = "ROBOTS_UNAVAILABLE"


@dataclass(frozen=True)
class Rules:
    parsed: Protego | None  # None: everything allowed
    unavailable: str | None  # why the rules are unknown
    until: float

    def verdict(self, url: str) -> Verdict:
        if self.unavailable is not None:
            return Verdict.UNAVAILABLE
        if self.parsed is None or self.parsed.can_fetch(url, ROBOTS_NAME):
            return Verdict.ALLOWED
        return Verdict.DISALLOWED


def rules_of(result: FetchResult, now: float) -> Rules:
    """The rules a robots.txt fetch gives (RFC 9309 2.3.1)."""
    status = result.http_status
    if status is not None and 200 <= status < 300:
        text = result.body.decode("utf-8", errors="replace")
        return Rules(Protego.parse(text), None, now + RULES_KEPT_S)
    if status is not None and 400 <= status < 500 and status != 429:
        return Rules(None, None, now + RULES_KEPT_S)
    why = f"HTTP {status}" if status is not None else (result.failure.code if result.failure else "no answer")
    return Rules(None, f"robots.txt could not be read ({why})", now + FAILURE_KEPT_S)


class RobotsRules:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._known: OrderedDict[str, Rules] = OrderedDict()
        self._fetching: dict[str, asyncio.Future[Rules]] = {}

    def known(self, url: str) -> Rules | None:
        """The origin's rules while they are kept, else None (they must be fetched)."""
        rules = self._known.get(_origin(url))
        return rules if rules is not None and rules.until > self._clock() else None

    async def fetch(self, url: str, fetch: Fetch) -> Rules:
        """The origin's rules, fetched once however many jobs ask at the same time."""
        origin = _origin(url)
        waiting = self._fetching.get(origin)
        if waiting is not None:
            return await asyncio.shield(waiting)
        future: asyncio.Future[Rules] = asyncio.get_running_loop().create_future()
        self._fetching[origin] = future
        try:
            result = await fetch(Request(url=f"{origin}/robots.txt"), ROBOTS_TIMEOUT_S, ROBOTS_LIMITS)
            rules = rules_of(result, self._clock())
            self._keep(origin, rules)
            future.set_result(rules)
            return rules
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters get it, nobody else must
            raise
        finally:
            del self._fetching[origin]

    def _keep(self, origin: str, rules: Rules) -> None:
        self._known[origin] = rules
        self._known.move_to_end(origin)
        while len(self._known) > MAX_ORIGINS:
            self._known.popitem(last=False)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port is not None else "")
