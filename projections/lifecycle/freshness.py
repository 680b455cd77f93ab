"""RFC 9111 for a shared cache: may a response be stored, how long is it fresh, must it be validated.

Read from the response's `Cache-Control`, `Expires`, `Date`, `Age`, `Vary` and `Pragma`, and the
request's own `Cache-Control`/`Pragma`:
- `no-store` (response or request), `private` and `Vary: *` make a response unstorable;
- `no-cache` (and `Pragma: no-cache` without a `Cache-Control`) stores it, but every use is
  validated with the origin first; so is every use for a request that asks `no-cache`/`max-age=0`;
- freshness is `s-maxage`, else `max-age`, else `Expires` minus `Date`, less the response's age
  (the larger of `Age` and how old `Date` says it is when it arrives); an invalid value is stale.
`Vary` on named request headers needs nothing more: every request header is part of an entry's key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime

_DELTA_SECONDS = re.compile(r"[0-9]+")
# Stored without an explicit freshness only with these statuses (RFC 9110 15.1), and the negative
# answers this project remembers for an hour.
HEURISTICALLY_CACHEABLE = frozenset({200, 203, 204, 206, 300, 301, 308, 401, 403, 404, 405, 410, 414, 501})
CACHE_HEADERS = ("cache-control", "expires", "date", "age", "pragma", "vary")


@dataclass(frozen=True)
class Freshness:
    storable: bool
    fresh_for_ms: int | None = None  # None: the origin states no freshness
    must_revalidate: bool = False


NOT_STORABLE = Freshness(storable=False)


def directives(value: str | None) -> dict[str, str | None]:
    """`Cache-Control` as lower-cased names to values (unquoted); a repeated directive keeps its
    smallest value, the most restrictive one."""
    found: dict[str, str | None] = {}
    for item in _items(value or ""):
        name, equals, raw = item.partition("=")
        name = name.strip().lower()
        if not name:
            continue
        argument = _unquoted(raw.strip()) if equals else None
        earlier = found.get(name)
        if earlier is not None and argument is not None:
            argument = min(earlier, argument, key=lambda text: (_seconds(text) is None, _seconds(text) or 0))
        found[name] = argument
    return found


def _items(value: str) -> list[str]:
    """The comma-separated items of a header value, commas inside quoted strings kept."""
    items: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for char in value:
        if escaped:
            escaped = False
        elif char == "\\" and quoted:
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            items.append("".join(current))
            current = []
            continue
        current.append(char)
    items.append("".join(current))
    return items


def _unquoted(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return re.sub(r"\\(.)", r"\1", raw[1:-1])
    return raw


def response_freshness(status: int, headers: Mapping[str, str], received_at: datetime) -> Freshness:
    """What a shared cache may do with a response of `status` whose caching headers are `headers`
    (lower-cased names, repeated ones joined with commas), received at `received_at`."""
    control = directives(headers.get("cache-control"))
    if "no-store" in control or "private" in control:
        return NOT_STORABLE
    if any(part.strip() == "*" for part in headers.get("vary", "").split(",")):
        return NOT_STORABLE  # matches no later request
    no_cache = "no-cache" in control or (
        "cache-control" not in headers and "no-cache" in headers.get("pragma", "").lower()
    )
    lifetime_s = _lifetime_s(control, headers)
    if lifetime_s is None:
        storable = status in HEURISTICALLY_CACHEABLE or "public" in control
        return Freshness(storable=storable, must_revalidate=no_cache) if storable else NOT_STORABLE
    fresh_s = lifetime_s - _age_s(headers, received_at)
    return Freshness(storable=True, fresh_for_ms=max(fresh_s, 0) * 1000, must_revalidate=no_cache)


def request_allows_store(headers: Mapping[str, str]) -> bool:
    """Whether a response to a request with these (lower-cased) headers may be stored."""
    return "no-store" not in directives(headers.get("cache-control"))


def request_allows_reuse(headers: Mapping[str, str]) -> bool:
    """Whether a request may be answered by a stored response without validating it first."""
    control = directives(headers.get("cache-control"))
    if "no-cache" in control or _seconds(control.get("max-age")) == 0:
        return False
    return "cache-control" in headers or "no-cache" not in headers.get("pragma", "").lower()


def _lifetime_s(control: dict[str, str | None], headers: Mapping[str, str]) -> int | None:
    for name in ("s-maxage", "max-age"):  # a shared cache reads s-maxage first
        if name in control:
            return _seconds(control[name]) or 0  # an invalid value: stale
    if "expires" not in headers:
        return None
    expires = _date(headers["expires"])
    if expires is None:
        return 0  # an invalid Expires (such as "0") means already expired
    date = _date(headers.get("date", "")) or expires
    return max(int((expires - date).total_seconds()), 0)


def _age_s(headers: Mapping[str, str], received_at: datetime) -> int:
    age = _seconds(headers.get("age")) or 0
    date = _date(headers.get("date", ""))
    apparent = 0 if date is None else max(int((received_at - date).total_seconds()), 0)
    return max(age, apparent)


def _seconds(value: str | None) -> int | None:
    """A delta-seconds value, or None when it is not one."""
    if value is None or not _DELTA_SECONDS.fullmatch(value):
        return None
    return min(int(value), 2**31)  # RFC 9111 1.2.2: larger values mean as good as forever


def _date(value: str) -> datetime | None:
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return parsed if parsed.tzinfo is not None else None
