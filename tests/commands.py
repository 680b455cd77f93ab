"""The `scrapestream` command as a user runs it: a subprocess with only the settings given."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

SCRAPESTREAM = str(Path(sys.executable).with_name("scrapestream"))


def clean_environment(**settings: str) -> dict[str, str]:
    """This process's environment without its SCRAPESTREAM_ variables, plus `settings`."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPESTREAM_")}
    return inherited | {f"SCRAPESTREAM_{name.upper()}": value for name, value in settings.items()}


async def start(*arguments: str, cwd: Path, **settings: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        SCRAPESTREAM, *arguments, cwd=cwd, env=clean_environment(**settings),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip


async def run(*arguments: str, cwd: Path, **settings: str) -> tuple[int, str]:
    """The exit code and everything printed."""
    process = await start(*arguments, cwd=cwd, **settings)
    output, _ = await asyncio.wait_for(process.communicate(), 90)
    return process.returncode or 0, output.decode()
