"""Bounded content decoding: a body is decompressed only up to its cap, even inside one chunk.

`Content-Encoding` codings are undone in reverse order; each stage stops as soon as its
output would pass the cap, so a gzip bomb costs at most the cap in memory and time.
"""

from __future__ import annotations

import zlib
from typing import Protocol

ACCEPT_ENCODING = "gzip, deflate"


class DecodingRefusedError(Exception):
    """The body cannot be decoded within the rules; `code` is its failure code."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


class _Stage(Protocol):
    def feed(self, data: bytes, limit: int) -> bytes: ...

    def flush(self) -> bytes: ...


class _Zlib:
    """gzip (with multiple members) or deflate (zlib-wrapped, or raw as some servers send it)."""

    def __init__(self, gzip: bool) -> None:
        self._gzip = gzip
        self._wbits = 16 + zlib.MAX_WBITS if gzip else zlib.MAX_WBITS
        self._inflater = zlib.decompressobj(self._wbits)
        self._started = False

    def feed(self, data: bytes, limit: int) -> bytes:
        out = bytearray()
        try:
            while data:
                out += self._inflate(data, limit - len(out))
                data = self._inflater.unconsumed_tail
                if self._inflater.eof and self._inflater.unused_data:
                    data = self._inflater.unused_data  # the next gzip member
                    self._inflater = zlib.decompressobj(self._wbits)
        except zlib.error as exc:
            raise DecodingRefusedError("DECODING_FAILED", f"corrupt {self._name} body: {exc}") from exc
        return bytes(out)

    def _inflate(self, data: bytes, room: int) -> bytes:
        if room < 0:
            raise DecodingRefusedError("BODY_TOO_LARGE", "the decoded body passes its cap")
        try:
            chunk = self._inflater.decompress(data, room + 1)
        except zlib.error:
            if self._gzip or self._started:
                raise
            self._wbits = -zlib.MAX_WBITS  # raw deflate without the zlib header
            self._inflater = zlib.decompressobj(self._wbits)
            chunk = self._inflater.decompress(data, room + 1)
        self._started = True
        if len(chunk) > room:
            raise DecodingRefusedError("BODY_TOO_LARGE", "the decoded body passes its cap")
        return chunk

    def flush(self) -> bytes:
        """What zlib still holds once all input was consumed (input is never left unconsumed)."""
        if self._started and not self._inflater.eof and self._gzip:
            raise DecodingRefusedError("DECODING_FAILED", "the gzip body ends early")
        return self._inflater.flush()

    @property
    def _name(self) -> str:
        return "gzip" if self._gzip else "deflate"


_CODINGS = {"gzip": True, "x-gzip": True, "deflate": False}


class BoundedDecoder:
    def __init__(self, content_encoding: str | None, max_decoded_bytes: int) -> None:
        codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        unknown = [c for c in codings if c not in _CODINGS]
        if unknown:
            raise DecodingRefusedError(
                "UNSUPPORTED_CONTENT_ENCODING", f"content-encoding {unknown[0][:64]!r}"
            )
        self._stages: list[_Stage] = [_Zlib(_CODINGS[c]) for c in reversed(codings)]
        self._limit = max_decoded_bytes
        self.decoded_bytes = 0

    def feed(self, chunk: bytes) -> bytes:
        for stage in self._stages:
            chunk = stage.feed(chunk, self._limit - self.decoded_bytes)
        return self._count(chunk)

    def flush(self) -> bytes:
        tail = b""
        for stage in self._stages:
            tail = stage.feed(tail, self._limit - self.decoded_bytes) + stage.flush()
        return self._count(tail)

    def _count(self, chunk: bytes) -> bytes:
        self.decoded_bytes += len(chunk)
        if self.decoded_bytes > self._limit:
            raise DecodingRefusedError("BODY_TOO_LARGE", f"more than {self._limit} bytes decoded")
        return chunk
