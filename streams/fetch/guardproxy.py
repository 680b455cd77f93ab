"""The address guard for a browser: a forwarding proxy that one browser context sends all its traffic to.

Every connection the page opens (documents, subresources, each redirect hop, websockets, which
Chromium tunnels with CONNECT) names its target here; the proxy resolves it, checks every address
against the deployment's rules and connects to the address it checked, so DNS cannot change the
answer afterwards. A refused target is recorded and answered `403` with `REFUSAL_HEADER`. Plain
HTTP requests are forwarded one per connection (`Connection: close`), so a reused browser
connection can never reach a second host unchecked. The bytes received from origins are counted
against the page's cap; past it every connection is cut.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from urllib.parse import urlsplit

from projections.lifecycle.limits import clip
from streams.fetch.guard import AddressPolicy, AddressRefusedError, ResolutionError, resolve_checked

REFUSAL_HEADER = "x-scrapestream-refused"
MAX_HEAD_BYTES = 64 * 1024
HEAD_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 15.0
CHUNK_BYTES = 64 * 1024
MAX_RECORDED = 100
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te"})


class GuardProxy:
    """One context's guarded proxy on `host` (a free port); `blocked` lists refused targets."""

    def __init__(self, policy: AddressPolicy, max_bytes: int, host: str = "127.0.0.1") -> None:
        self._policy = policy
        self._max_bytes = max_bytes
        self._host = host
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.blocked: list[str] = []
        self.failures: dict[str, str] = {}  # target -> failure code, for targets that failed here
        self.received_bytes = 0
        self.exceeded = False

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._accept, self._host, 0, limit=MAX_HEAD_BYTES)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://{self._host}:{port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(reader, writer))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._relay(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            pass  # the browser or the origin went away, or spoke nonsense: this connection ends
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(HEAD_TIMEOUT_S):
            head = await reader.readuntil(b"\r\n\r\n")
        request_line, _, header_block = head.decode("latin-1").partition("\r\n")
        method, target, _version = request_line.split(" ", 2)
        tunnel = method.upper() == "CONNECT"
        host, port, path = _tunnel_target(target) if tunnel else _forward_target(target)
        address = await self._checked(target, host, port)
        if address is None:
            await _refuse(writer, self.failures.get(target, "ADDRESS_REFUSED"))
            return
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                upstream_reader, upstream_writer = await asyncio.open_connection(address, port)
        except (OSError, TimeoutError):
            self._record_failure(target, "CONNECTION_FAILED")
            await _refuse(writer, "CONNECTION_FAILED")
            return
        try:
            if tunnel:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream_writer.write(_forwarded_head(method, path, header_block).encode("latin-1"))
            await _exchange(reader, writer, upstream_reader, upstream_writer, self._count)
        finally:
            upstream_writer.close()

    async def _checked(self, target: str, host: str, port: int) -> str | None:
        try:
            return await resolve_checked(
                host, port, self._policy.allow_private, self._policy.allowed_networks
            )
        except AddressRefusedError:
            if len(self.blocked) < MAX_RECORDED:
                self.blocked.append(clip(target, 2_048))
            self._record_failure(target, "ADDRESS_REFUSED")
        except ResolutionError:
            self._record_failure(target, "DNS_FAILED")
        return None

    def _record_failure(self, target: str, code: str) -> None:
        if len(self.failures) < MAX_RECORDED:
            self.failures[target] = code

    def _count(self, size: int) -> None:
        self.received_bytes += size
        if self.received_bytes > self._max_bytes and not self.exceeded:
            self.exceeded = True
            for task in list(self._connections):
                task.cancel()


def _tunnel_target(target: str) -> tuple[str, int, str]:
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65_536:
        raise ValueError(f"not a host:port tunnel target: {clip(target, 256)!r}")
    return host.strip("[]"), int(port), ""


def _forward_target(target: str) -> tuple[str, int, str]:
    parts = urlsplit(target)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"not an absolute http URL: {clip(target, 256)!r}")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.hostname, parts.port or 80, path


def _forwarded_head(method: str, path: str, header_block: str) -> str:
    lines = [f"{method} {path} HTTP/1.1"]
    for line in header_block.split("\r\n"):
        name = line.partition(":")[0].strip().lower()
        if line and name not in HOP_BY_HOP:
            lines.append(line)
    lines.append("Connection: close")
    return "\r\n".join(lines) + "\r\n\r\n"


async def _refuse(writer: asyncio.StreamWriter, code: str) -> None:
    status = "403 Forbidden" if code == "ADDRESS_REFUSED" else "502 Bad Gateway"
    head = f"HTTP/1.1 {status}\r\n{REFUSAL_HEADER}: {code}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    writer.write(head.encode())
    await writer.drain()


async def _exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
    counted: Callable[[int], None],
) -> None:
    """Relay both ways until either side ends; the other direction is then cut."""
    loop = asyncio.get_running_loop()
    directions = [
        loop.create_task(_pipe(reader, upstream_writer, None)),
        loop.create_task(_pipe(upstream_reader, writer, counted)),
    ]
    try:
        await asyncio.wait(directions, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for direction in directions:
            direction.cancel()
        await asyncio.gather(*directions, return_exceptions=True)


async def _pipe(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, counted: Callable[[int], None] | None
) -> None:
    try:
        while chunk := await source.read(CHUNK_BYTES):
            if counted is not None:
                counted(len(chunk))
            sink.write(chunk)
            await sink.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if sink.can_write_eof():
                sink.write_eof()
