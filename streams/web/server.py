"""Serves an ASGI app with uvicorn on the worker's own event loop, on a socket bound up front.

Binding first lets the worker advertise its address in the consumer group before it serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
from collections.abc import Iterator

import uvicorn

from streams.errors import UsageError
from streams.web.fastpath import Asgi
from streams.web.guarded_http import guarded_http

STOP_WITHIN_S = 5.0


class _InLoopServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        self._exit = asyncio.Event()
        super().__init__(config)
        self.listening = asyncio.Event()

    @property
    def should_exit(self) -> bool:
        return self._exit.is_set()

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        if value:
            self._exit.set()

    async def main_loop(self) -> None:
        # uvicorn's own loop wakes ten times a second; the date header it keeps changes once a second.
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 10) % 864_000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._exit.wait()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the worker's CLI owns SIGINT and SIGTERM

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.listening.set()


def _more_open_files() -> None:
    """Raise the soft open-file limit to the hard one: each connection is a file, and 1,024 (a common
    default) is far fewer than the connections a worker's API and Kafka clients may hold."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(
                resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 1 << 20, hard)
            )


class ApiServer:
    def __init__(
        self, host: str, port: int, head_timeout_s: float = 10.0, body_timeout_s: float = 120.0
    ) -> None:
        self._timeouts = (head_timeout_s, body_timeout_s)
        _more_open_files()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # IPPROTO_TCP, so asyncio sets TCP_NODELAY on accepted connections (no Nagle stalls).
        self._socket = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
        except OSError as exc:
            self._socket.close()
            raise UsageError(
                f"the HTTP API cannot listen on {host}:{port} ({exc.strerror}): set SCRAPESTREAM_WEB_PORT "
                "to a free port (0 picks one), or SCRAPESTREAM_WEB_HOST to an address of this machine"
            ) from exc
        self._socket.listen(1024)
        self._socket.setblocking(False)
        self.port = int(self._socket.getsockname()[1])
        self._server: _InLoopServer | None = None
        self._task: asyncio.Task[None] | None = None

    async def serve(self, app: Asgi) -> None:
        config = uvicorn.Config(
            app,
            loop="none",
            http=guarded_http(*self._timeouts),
            lifespan="off",
            access_log=False,
            log_config=None,
            log_level="warning",
            server_header=False,
            proxy_headers=False,  # client addresses are not logged; nothing reads them
            timeout_keep_alive=30,
        )
        self._server = _InLoopServer(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]), name="http-api")
        listening = asyncio.create_task(self._server.listening.wait())
        await asyncio.wait({self._task, listening}, return_when=asyncio.FIRST_COMPLETED)
        listening.cancel()
        if self._task.done():
            self._task.result()  # raises what stopped it

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            try:
                async with asyncio.timeout(STOP_WITHIN_S):
                    await asyncio.shield(self._task)
            except TimeoutError:
                self._server.force_exit = True
                await self._task
        self._socket.close()
