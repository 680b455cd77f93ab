"""A small client of the worker's HTTP API, for the CLI and for scripts."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

import httpx

from schemas.errors import ScrapestreamError
from streams.devstate import read_dev_state
from streams.errors import UsageError

DEFAULT_URL = "http://127.0.0.1:8080"
TIMEOUT_S = 30.0


class ApiRequestError(ScrapestreamError):
    """The API answered with an error: its status, stable code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code


def url_named(explicit: str | None) -> bool:
    """Whether the command was told which API to call (`--url`, SCRAPESTREAM_URL)."""
    return bool(explicit or os.environ.get("SCRAPESTREAM_URL"))


def api_url(explicit: str | None) -> str:
    """`--url`, else SCRAPESTREAM_URL, else a running `scrapestream dev` here, else the default port."""
    if explicit:
        return explicit.rstrip("/")
    if os.environ.get("SCRAPESTREAM_URL"):
        return os.environ["SCRAPESTREAM_URL"].rstrip("/")
    state = read_dev_state()
    return str(state["web_url"]) if state is not None else DEFAULT_URL


class ApiClient:
    def __init__(self, url: str, token: str | None, *, named: bool = False) -> None:
        headers = {} if not token else {"Authorization": f"Bearer {token}"}
        self.url = url
        self._named = named  # by --url or SCRAPESTREAM_URL, not found from a `dev` here
        self._http = httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT_S)

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *_: object) -> None:
        self._http.close()

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        present = {name: value for name, value in (params or {}).items() if value not in (None, [], "")}
        return self._answer(lambda: self._http.get(path, params=present))

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._answer(lambda: self._http.post(path, json=body))

    def delete(self, path: str) -> Any:
        return self._answer(lambda: self._http.delete(path))

    def download(self, path: str, destination: Path) -> Downloaded:
        """Stream `path`'s bytes into `destination`: their SHA-256 (hex) and the one the API states.
        `path` must be one of this API's own: the token goes to no other origin, whatever an answer
        names."""
        parts = urlsplit(path)
        if parts.scheme or parts.netloc or not path.startswith("/") or path.startswith("//"):
            raise ApiRequestError(0, "refused", f"{path[:120]!r} is not a path of {self.url}: not downloaded")
        digest = hashlib.sha256()

        def call() -> httpx.Response:
            with self._http.stream("GET", path) as response:
                if response.status_code >= 400:
                    response.read()
                    return response
                with destination.open("wb") as written:
                    for chunk in response.iter_bytes():
                        digest.update(chunk)
                        written.write(chunk)
                return response

        response = self._sent(call)
        if response.status_code >= 400:
            raise _refusal(response)
        stated = _stated_sha256(response.headers.get("repr-digest", ""))
        return Downloaded(digest.hexdigest(), stated, response.headers.get("content-type", ""))

    def _answer(self, call: Callable[[], httpx.Response]) -> Any:
        response = self._sent(call)
        if response.status_code >= 400:
            raise _refusal(response)
        try:
            return response.json()
        except json.JSONDecodeError:
            return None

    def _sent(self, call: Callable[[], httpx.Response]) -> httpx.Response:
        try:
            return call()
        except httpx.HTTPError as exc:
            unreached = f"cannot reach the scrapestream API at {self.url} ({type(exc).__name__})"
            said = (
                f"{unreached}: is a worker running there, and is the address right?"
                if self._named
                else f"{unreached}: start `scrapestream dev` in this directory, or pass --url (or set "
                "SCRAPESTREAM_URL) for a worker"
            )
            # Nothing named a worker (no --url, SCRAPESTREAM_URL or dev here): the command's mistake.
            raise (UsageError(said) if self.url == DEFAULT_URL else ScrapestreamError(said)) from exc


@dataclass(frozen=True)
class Downloaded:
    sha256: str
    stated_sha256: str | None  # from the answer's Repr-Digest, when it gave one
    content_type: str


def _stated_sha256(header: str) -> str | None:
    found = re.search(r"sha-256=:([A-Za-z0-9+/=]+):", header)
    try:
        return None if found is None else base64.b64decode(found[1], validate=True).hex()
    except ValueError:
        return None


def whole_id(given: str, what: str, starting_with: Callable[[str], list[str]]) -> str:
    """`given` itself when it is a whole id, else the one id `starting_with` it finds (a short id as
    the CLI's tables print it)."""
    text = given.strip().lower()
    try:
        return str(UUID(text))
    except ValueError:
        pass
    if not text or any(char not in "0123456789abcdef-" for char in text):
        raise UsageError(f"{given!r} is neither a {what} id nor the start of one")
    found = starting_with(text)
    if not found:
        raise ScrapestreamError(f"no {what} id starts with {given!r}")
    if len(found) > 1:
        raise UsageError(f"more than one {what} id starts with {given!r}: give more of it")
    return found[0]


def _refusal(response: httpx.Response) -> ApiRequestError:
    try:
        document = response.json()
    except ValueError:
        document = None
    if isinstance(document, dict) and "code" in document:
        return ApiRequestError(response.status_code, str(document["code"]), str(document.get("message")))
    return ApiRequestError(response.status_code, "error", response.text[:500])
