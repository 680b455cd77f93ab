"""The README's "Run it" section and its Python examples, run as a user pastes them.

Every shell block of the section runs in order, in a fresh directory whose `.venv/bin` is this
checkout's installed commands (the install itself is what `.ci/run` does), against a real `dev`,
with a loopback site in place of example.com and the id `submit` printed in place of JOB_ID.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from tests.browser_pages import chromium_or_skip
from tests.servers import loopback

pytestmark = pytest.mark.asyncio(loop_scope="module")
ROOT = Path(__file__).parent.parent.parent
README = (ROOT / "README.md").read_text()
PAGE = "<!doctype html><html><body><main><h1>Example Domain</h1></main></body></html>"


def section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.index("\n## ", start + 1)
    return README[start:end]


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)


def commands(block: str) -> list[str]:
    """The block's commands, one per line once continuation lines are joined."""
    return [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def site() -> AsyncIterator[str]:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async with loopback(page) as port:
        yield f"http://127.0.0.1:{port}/"


def environment() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPESTREAM_")}
    return clean | {"COLUMNS": "80", "TERM": "dumb"}


async def shell(command: str, cwd: Path) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", command, cwd=cwd, env=environment(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), 150)
    return process.returncode or 0, output.decode()


async def test_every_command_of_run_it_works_as_pasted(site, tmp_path):
    chromium_or_skip()  # the screenshot example renders a page
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)  # this checkout's installed venv
    first, *others = shell_blocks(section("Run it"))
    dev_command = first.strip().split("&&")[-1].strip()
    assert dev_command == ".venv/bin/scrapestream dev --allow-private"
    dev = await asyncio.create_subprocess_exec(
        "bash", "-c", f"exec {dev_command}", cwd=tmp_path, env=environment(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        for _ in range(600):
            if (tmp_path / ".scrapestream" / "dev.json").exists():
                break
            await asyncio.sleep(0.1)
        job_id = ""
        for block in others:
            for command in commands(block):
                if "ARTIFACT_ID" in command:  # as `get` lists it, whole at 80 columns
                    _, shown = await shell(f".venv/bin/scrapestream get {job_id}", tmp_path)
                    listed = re.search(r"/artifacts/([0-9a-f-]{36})", shown)
                    assert listed is not None, shown
                    command = command.replace("ARTIFACT_ID", listed.group(1))
                command = command.replace("https://example.com/", site).replace("JOB_ID", job_id)
                if " watch" in command:
                    await watched(command, tmp_path, site)
                    continue
                code, output = await shell(command, tmp_path)
                assert code == 0, f"{command}\n{output}"
                assert "Traceback" not in output
                found = re.search(r"job ([0-9a-f-]{36}): created", output)
                job_id = job_id or (found.group(1) if found else "")
                if "--type browser.render" in command:
                    assert "SUCCEEDED" in output
                    assert re.search(r"job [0-9a-f-]{36}: created", output), output  # not the first job
        await the_python_example_runs(site, tmp_path)
        await watching_a_page_works_as_pasted(site, tmp_path)
    finally:
        if dev.returncode is None:
            dev.send_signal(signal.SIGINT)
        printed, _ = await asyncio.wait_for(dev.communicate(), 60)
    stopped = "stopped; its broker and data are gone; its log stays: .scrapestream/broker.log"
    assert stopped in printed.decode()
    assert not (tmp_path / ".scrapestream" / "data").exists()


async def watching_a_page_works_as_pasted(site: str, cwd: Path) -> None:
    """The "Watch a page" section against the same `dev`, its monitor's id in place of MONITOR_ID."""
    monitor_id = ""
    for block in shell_blocks(section("Watch a page")):
        for command in commands(block):
            short = " monitor checks " in command  # as `monitor list` prints it
            given = monitor_id[:8] if short else monitor_id
            command = command.replace("https://example.com/", site).replace("MONITOR_ID", given)
            code, output = await shell(command, cwd)
            assert code == 0, f"{command}\n{output}"
            assert "Traceback" not in output
            found = re.search(r"monitor\s+([0-9a-f-]{36})", output)
            monitor_id = monitor_id or (found.group(1) if found else "")
            if " monitor get " in command:
                assert "every 30 s" in output
                assert "compares ignore 'footer'" in output
                assert re.search(r"^owner\s+cli$", output, re.MULTILINE), output  # as `submit`'s jobs
            if " list --checks" in command:
                for _ in range(60):  # the first check runs within seconds of `monitor add`
                    if re.search(rf"check of.*\n(.*\n)*.*{monitor_id[:8]}", output):
                        break
                    await asyncio.sleep(0.5)
                    _, output = await shell(command, cwd)
                assert re.search(rf"check of.*\n(.*\n)*.*{monitor_id[:8]}", output), output
                _, plain = await shell(".venv/bin/scrapestream list --json", cwd)
                assert '"monitor_id": null' in plain
                assert monitor_id not in plain  # `list` alone leaves the checks out
            if " monitor pause " in command:
                _, shown = await shell(f".venv/bin/scrapestream monitor get {monitor_id}", cwd)
                assert "state    paused ('site maintenance')" in shown, shown
            if " monitor delete " in command:
                assert "deleted" in output
    assert monitor_id


async def watched(command: str, cwd: Path, site: str) -> None:
    """`watch` runs until stopped: a completion that happens meanwhile is printed, then Ctrl-C ends it
    cleanly."""
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", f"exec {command}", cwd=cwd, env=environment(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    await asyncio.sleep(3)  # let it join the topic's end before the completion it should show
    code, output = await shell(f".venv/bin/scrapestream submit {site}?watched --wait", cwd)
    assert code == 0, output
    line = await asyncio.wait_for(process.stdout.readline(), 60)
    assert b"SUCCEEDED" in line
    process.send_signal(signal.SIGINT)
    rest, _ = await asyncio.wait_for(process.communicate(), 30)
    assert b"Traceback" not in rest
    assert process.returncode == 130


async def the_python_example_runs(site: str, cwd: Path) -> None:
    example = next(
        b for b in re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL) if "asyncio.run" in b
    )
    script = cwd / "example.py"
    script.write_text(example.replace("https://example.com/", site))
    python = str(cwd / ".venv" / "bin" / "python")
    code, output = await shell(f"{python} example.py", cwd)
    assert code == 0, output
    assert "JobStatus.SUCCEEDED" in output or "SUCCEEDED" in output
