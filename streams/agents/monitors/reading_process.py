"""A child process that reads pages for monitors' checks, within memory and time limits.

An HTML parser's work is not bounded by the bytes it is given (nested formatting elements make it
rebuild its list of them at every block: a 19 KiB page can take half a GiB and seconds of CPU,
holding the GIL). Here it runs in a process of its own with an address-space limit, and a read
that passes its time limit is ended by killing that process; either way the read fails with
`ReadingLimitError`, the check's problem, and the next read starts a fresh process.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import resource
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from schemas.errors import ScrapestreamError

T = TypeVar("T")
MEMORY_BYTES = 768 * 2**20  # the process's whole address space: the interpreter takes ~64 MiB of it
TIME_LIMIT_S = 10.0


class ReadingLimitError(ScrapestreamError):
    """A read that took more memory or time than a check may."""


class ReadingProcess:
    def __init__(self, memory_bytes: int = MEMORY_BYTES, time_limit_s: float = TIME_LIMIT_S) -> None:
        self._memory_bytes = memory_bytes
        self._time_limit_s = time_limit_s
        self._context = multiprocessing.get_context("spawn")  # never a fork of a threaded worker
        self._process: BaseProcess | None = None
        self._connection: Connection | None = None
        self._lock = threading.Lock()

    async def run(self, function: Callable[..., T], *arguments: Any) -> T:
        """`function(*arguments)` in the child; its exception's text, or a limit, as `ReadingLimitError`."""
        return await asyncio.to_thread(self._call, function, arguments)

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _call(self, function: Callable[..., T], arguments: tuple[Any, ...]) -> T:
        with self._lock:
            connection = self._started()
            try:
                connection.send((function, arguments))
                if not connection.poll(self._time_limit_s):
                    self._stop()
                    raise ReadingLimitError(f"reading took more than {self._time_limit_s:g} s")
                done, value = connection.recv()
            except (EOFError, OSError, BrokenPipeError) as exc:
                code = None if self._process is None else self._process.exitcode
                self._stop()
                raise ReadingLimitError(f"the reader ended (exit {code}): out of memory") from exc
        if not done:
            raise ReadingLimitError(value)
        return value  # type: ignore[no-any-return]

    def _started(self) -> Connection:
        if self._process is not None and self._process.is_alive() and self._connection is not None:
            return self._connection
        self._stop()
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=_serve, args=(child, self._memory_bytes), name="scrapestream-reader", daemon=True
        )
        process.start()
        child.close()
        self._process, self._connection = process, parent
        return parent

    def _stop(self) -> None:
        if self._connection is not None:
            self._connection.close()
        if self._process is not None:
            self._process.kill()
            self._process.join(5)
        self._process = self._connection = None


def _serve(connection: Connection, memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    while True:
        try:
            function, arguments = connection.recv()
        except EOFError:
            return
        try:
            connection.send((True, function(*arguments)))
        except MemoryError:
            connection.send((False, "reading took more memory than a check may"))
        except Exception as exc:  # whatever the page makes the reader raise is the check's outcome
            connection.send((False, f"{type(exc).__name__}: {str(exc)[:200]}"))
