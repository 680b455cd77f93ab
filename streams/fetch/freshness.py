"""What RFC 9111 lets a shared cache do with a response, read with hishel's implementation of it."""

from __future__ import annotations

from collections.abc import Mapping

from hishel import CacheMiss, CacheOptions, Headers, Request, Response, StoreAndUse
from hishel._core._spec import get_age, get_freshness_lifetime

CACHE_HEADERS = ("cache-control", "expires", "date", "age", "last-modified", "etag", "pragma", "vary")


def freshness(url: str, status: int, headers: Mapping[str, str]) -> tuple[bool, int | None]:
    """Whether a shared cache may store the response, and for how many ms from now it stays fresh.

    The freshness is None when the origin states none (no `max-age`, `s-maxage` or `Expires`).
    """
    kept = Headers({name: headers[name] for name in CACHE_HEADERS if name in headers})
    response = Response(status, kept)
    state = CacheMiss(request=Request("GET", url), options=CacheOptions(shared=True)).next(response)
    if not isinstance(state, StoreAndUse):
        return False, None
    lifetime = get_freshness_lifetime(response, is_cache_shared=True)
    if lifetime is None:
        return True, None
    return True, max(lifetime - get_age(response), 0) * 1000
