"""Asking whether the configured browser is Chromium leaves the event loop free."""

import asyncio
import stat

from streams.fetch.browser import probe_browser
from streams.settings import load_settings


async def test_a_slow_version_probe_does_not_hold_the_event_loop(tmp_path):
    started, answer = tmp_path / "started", tmp_path / "answer"
    executable = tmp_path / "chromium"
    # It names Chromium only once the loop, still running, lets it: a blocked loop never does.
    executable.write_text(
        f"#!/bin/sh\ntouch {started}\nwhile [ ! -e {answer} ]; do sleep 0.02; done\necho Chromium 140.0\n"
    )
    executable.chmod(executable.stat().st_mode | stat.S_IXUSR)
    probing = asyncio.create_task(probe_browser(load_settings(browser_executable=str(executable))))
    while not started.exists():  # noqa: ASYNC110 (a file another process makes)
        await asyncio.sleep(0.02)
    answer.touch()
    assert await probing is None
