"""The `scrapestream` command as a user runs it: a subprocess with only the settings given."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import signal
import struct
import sys
import termios
from pathlib import Path

SCRAPESTREAM = str(Path(sys.executable).with_name("scrapestream"))


def clean_environment(**settings: str) -> dict[str, str]:
    """This process's environment without its SCRAPESTREAM_ variables, plus `settings`."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPESTREAM_")}
    return inherited | {f"SCRAPESTREAM_{name.upper()}": value for name, value in settings.items()}


async def start(
    *arguments: str, cwd: Path, stdin: int | None = None, **settings: str
) -> asyncio.subprocess.Process:
    settings.setdefault("processes", "1")  # `dev` and `worker` as one process unless a test asks for more
    return await asyncio.create_subprocess_exec(
        SCRAPESTREAM, *arguments, cwd=cwd, env=clean_environment(**settings), stdin=stdin,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip


async def run(*arguments: str, cwd: Path, given: bytes | None = None, **settings: str) -> tuple[int, str]:
    """The exit code and everything printed; `given` is what is typed on its standard input."""
    stdin = None if given is None else asyncio.subprocess.PIPE
    process = await start(*arguments, cwd=cwd, stdin=stdin, **settings)
    output, _ = await asyncio.wait_for(process.communicate(given), 90)
    return process.returncode or 0, output.decode()


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")


class Terminal:
    """`scrapestream` in a pseudo-terminal, as a person at a terminal runs it: what it draws is read
    as it comes (escape codes removed); keys are typed; Ctrl-C is sent as the terminal sends it."""

    def __init__(self, process: asyncio.subprocess.Process, master: int) -> None:
        self.process = process
        self._master = master
        self._raw = bytearray()
        self._changed = asyncio.Event()
        asyncio.get_running_loop().add_reader(master, self._read)

    def _read(self) -> None:
        try:
            chunk = os.read(self._master, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            asyncio.get_running_loop().remove_reader(self._master)
        self._raw += chunk
        self._changed.set()

    @property
    def text(self) -> str:
        return ANSI.sub("", self._raw.decode(errors="replace"))

    async def read_until(self, pattern: str, timeout_s: float = 60) -> re.Match[str]:
        async with asyncio.timeout(timeout_s):
            while (found := re.search(pattern, self.text)) is None:
                self._changed.clear()
                await self._changed.wait()
        return found

    def type(self, keys: str) -> None:
        os.write(self._master, keys.encode())

    def interrupt(self) -> None:
        self.process.send_signal(signal.SIGINT)

    async def finish(self, timeout_s: float = 90) -> int:
        """The exit code, once the command has ended and everything it drew was read."""
        try:
            code = await asyncio.wait_for(self.process.wait(), timeout_s)
            await asyncio.sleep(0.2)
        finally:
            await self.close()
        return code

    async def close(self) -> None:
        """Ends the command if it still runs, and the terminal; again is a no-op."""
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        if self._master >= 0:
            asyncio.get_running_loop().remove_reader(self._master)
            os.close(self._master)
            self._master = -1


async def in_terminal(*arguments: str, cwd: Path, columns: int = 120, **settings: str) -> Terminal:
    master, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    environment = clean_environment(**settings) | {"TERM": "xterm-256color", "COLUMNS": str(columns)}
    process = await asyncio.create_subprocess_exec(
        SCRAPESTREAM, *arguments, cwd=cwd, env=environment, stdin=follower, stdout=follower, stderr=follower
    )
    os.close(follower)
    return Terminal(process, master)
