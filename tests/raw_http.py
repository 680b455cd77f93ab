"""HTTP as an attacker writes it by hand: a request's head on a raw socket, a body or none."""

from __future__ import annotations

import asyncio
import contextlib


async def raw_exchange(port: int, head: str, body: bytes = b"", read_s: float = 30) -> tuple[int, bytes]:
    """Sends a request's head (and `body`, if any) on a raw socket; the status the worker answers
    with, before the rest of a declared body was ever sent."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(65_536), read_s)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    return status, answer


def head_of(method: str, path: str, length: int | None, token: str | None = None, **extra: str) -> str:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += [f"Content-Length: {length}"] if length is not None else ["Transfer-Encoding: chunked"]
    lines += [f"Authorization: Bearer {token}"] if token else []
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in extra.items()]
    return "\n".join(lines) + "\n"
