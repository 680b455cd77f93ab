"""The CLI for bulk work as a user runs it against `scrapestream dev`: `submit --from`, in a terminal."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import signal
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import pytest_asyncio

from tests.commands import Terminal, in_terminal, run, start
from tests.e2e.conftest import Origin
from tests.e2e.test_dev import wait_for_file

pytestmark = pytest.mark.asyncio(loop_scope="module")
URLS = 10_000


RUNNING: dict[str, asyncio.subprocess.Process] = {}  # the module's `dev`, which a test may pause


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def dev(tmp_path_factory) -> AsyncIterator[tuple[Path, str]]:
    from streams.broker.embedded import free_loopback_port

    directory = tmp_path_factory.mktemp("bulk")
    process = await start("dev", "--allow-private", cwd=directory, web_port=str(free_loopback_port()))
    RUNNING["dev"] = process
    try:
        state = await wait_for_file(directory / ".scrapestream" / "dev.json")
        yield directory, str(state["web_url"])
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.communicate(), 60)


@pytest_asyncio.fixture(loop_scope="module")
async def terminals() -> AsyncIterator[Callable[..., Awaitable[Terminal]]]:
    """Opens commands in pseudo-terminals, and ends every one of them, whatever the test did."""
    opened: list[Terminal] = []

    async def open_terminal(*arguments: str, cwd: Path) -> Terminal:
        opened.append(await in_terminal(*arguments, cwd=cwd))
        return opened[-1]

    try:
        yield open_terminal
    finally:
        for terminal in opened:
            await terminal.close()


def submissions(output: str) -> Counter[str]:
    """`submit --from --json`'s answer per line: each line is said once."""
    said = [json.loads(line) for line in output.splitlines() if line.startswith('{"line"')]
    assert len({item["line"] for item in said}) == len(said)
    return Counter(item["submission"] for item in said)


async def settled(web_url: str) -> None:
    """Until no job of the dev is still to run or running."""
    async with asyncio.timeout(300):
        while True:
            async with httpx.AsyncClient(base_url=web_url) as http:
                metrics = (await http.get("/metrics")).text
            active = re.findall(
                r'^scrapestream_jobs\{state="(?:PENDING|LEASED|RETRY_WAIT)"\} (\S+)$', metrics, re.M
            )
            if sum(float(count) for count in active) == 0:
                return
            await asyncio.sleep(0.5)


async def jobs_kept(web_url: str) -> int:
    async with httpx.AsyncClient(base_url=web_url) as http:
        metrics = (await http.get("/metrics")).text
    counts = re.findall(r"^scrapestream_jobs\{[^}]*\} (\S+)$", metrics, re.MULTILINE)
    return sum(int(float(count)) for count in counts)


@pytest.mark.timeout(600)
async def test_ten_thousand_urls_show_progress_resume_after_ctrl_c_and_create_nothing_twice(
    dev: tuple[Path, str], origin: Origin, terminals: Any
):
    directory, web_url = dev
    listing = directory / "urls.txt"
    listing.write_text("".join(origin.url(f"/page/bulk-{number}") + "\n" for number in range(URLS)))

    first = await terminals("submit", "--from", "urls.txt", cwd=directory)
    decided = await first.read_until(r"submitted\s.*?\s(\d{3,5})/10000\s+[\d,]+/s")  # and a rate
    RUNNING["dev"].send_signal(signal.SIGSTOP)  # no decisions now: the run cannot end before Ctrl-C
    try:
        first.interrupt()
        assert await first.finish() == 130, first.text
    finally:
        RUNNING["dev"].send_signal(signal.SIGCONT)
    stopped = re.search(r"interrupted: ([\d,]+) of 10,000 submitted \(([\d,]+) decided\)", first.text)
    assert stopped is not None, first.text
    assert "again to submit the rest" in first.text
    assert int(stopped[2].replace(",", "")) >= int(decided[1])

    code, output = await run("submit", "--from", "urls.txt", "--json", cwd=directory)
    assert code == 0, output[-2000:]
    resumed = submissions(output)
    assert resumed["created"] + resumed["reused"] == URLS
    assert resumed["reused"] >= int(decided[1])  # what the first run submitted was not created again
    assert resumed["created"] > 0

    code, output = await run("submit", "--from", "urls.txt", "--json", cwd=directory)
    assert code == 0, output[-2000:]
    assert submissions(output) == {"reused": URLS}
    assert await jobs_kept(web_url) == URLS


async def test_a_mixed_file_waited_for_shows_live_counts_and_a_summary(
    dev: tuple[Path, str], origin: Origin, terminals: Any
):
    directory, _ = dev
    lines: list[Any] = [
        origin.url("/page/mixed-a"),
        {"url": origin.url("/page/mixed-b"), "labels": {"batch": "mixed"}},
        {"url": origin.url("/missing/mixed-c")},
        "ftp://example.com/not-fetched",
        '{"url": 5}',
        "# a comment, and a blank line next",
        "",
    ]
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    (directory / "mixed.jsonl").write_text(text + "\n")
    terminal = await terminals("submit", "--from", "mixed.jsonl", "--wait", cwd=directory)
    await terminal.read_until(r"succeeded 2")
    assert await terminal.finish() == 1  # one rejected, one invalid, one dead-lettered
    shown = terminal.text
    assert "line 5: url: Input should be a valid string (not submitted)" in shown
    assert "line 4: ftp://example.com/not-fetched rejected UNSUPPORTED_SCHEME" in shown
    assert re.search(r"dead_letter 1 · succeeded 2", shown)
    for outcome, count in (("created", 3), ("rejected", 1), ("invalid line", 1)):
        assert re.search(rf"{outcome}\s*│\s*{count}\s*│", shown), shown
    assert re.search(r"SUCCEEDED\s*│\s*2\s*│", shown)
    assert re.search(r"DEAD_LETTER\s*│\s*1\s*│", shown)


async def test_submit_from_standard_input_and_the_mistakes_it_refuses(dev: tuple[Path, str], origin: Origin):
    directory, _ = dev
    given = f"{origin.url('/page/stdin-a')}\n{origin.url('/page/stdin-b')}\n".encode()
    code, output = await run("submit", "--from", "-", "--json", cwd=directory, given=given)
    assert code == 0, output
    assert sum(submissions(output).values()) == 2
    code, output = await run("submit", "--from", "missing.txt", cwd=directory)
    assert code == 2
    assert "cannot read missing.txt" in output
    code, output = await run("submit", origin.url("/page/x"), "--from", "urls.txt", cwd=directory)
    assert code == 2
    assert "give a URL or --from FILE" in output
    code, output = await run("submit", "--from", "urls.txt", "--idempotency-key", "k", cwd=directory)
    assert code == 2


async def test_top_draws_the_deployment_in_place_and_quits_cleanly(
    dev: tuple[Path, str], origin: Origin, terminals: Any
):
    directory, _ = dev
    code, output = await run("submit", origin.url("/page/top"), "--wait", cwd=directory)
    assert code == 0, output
    code, once = await run("top", "--once", cwd=directory)  # no terminal: one frame for a script
    assert code == 0, once
    assert re.search(r"completions/s \(last \d\.\d s\) \d+\.\d\d", once), once  # measured, over a second
    assert "Jobs per state" in once
    assert "q quits" not in once
    terminal = await terminals("top", "--interval", "0.5", cwd=directory)
    await terminal.read_until(r"states of every job[\s\S]*Jobs per state[\s\S]*SUCCEEDED")
    await terminal.read_until(r"Busiest hosts, last hour[\s\S]*127\.0\.0\.1")
    await terminal.read_until(r"completions/s \(last \d+\.\d s\) \d+\.\d\d")  # measured between frames
    await terminal.read_until(r"Lag[\s\S]*\.commands")
    await terminal.read_until(r"Routes[\s\S]*direct")
    redrawn = terminal.text.count("q quits")
    await terminal.read_until(rf"(q quits[\s\S]*){{{redrawn + 1}}}")  # drawn again, in place
    terminal.type("q")
    assert await terminal.finish() == 0
    assert "Traceback" not in terminal.text
    interrupted = await terminals("top", cwd=directory)
    await interrupted.read_until("q quits")
    interrupted.interrupt()
    assert await interrupted.finish() == 0
    assert "Traceback" not in interrupted.text


async def test_export_downloads_verified_artifacts_and_resumes(
    dev: tuple[Path, str], origin: Origin, terminals: Any
):
    directory, _ = dev
    urls = [origin.url(f"/page/export-{number}") for number in range(3)]
    (directory / "export.txt").write_text("\n".join(urls) + "\n")
    submitting = ("submit", "--from", "export.txt", "--caller", "exporter", "--wait")
    code, output = await run(*submitting, cwd=directory)
    assert code == 0, output
    arguments = ("export", "--state", "SUCCEEDED", "--since", "1h", "--caller", "exporter", "--to", "out")
    terminal = await terminals(*arguments, cwd=directory)
    await terminal.read_until(r"exporting")
    assert await terminal.finish() == 0, terminal.text
    assert "3 artifacts of the matching jobs: 3 downloaded, 0 already there, 0 failed" in terminal.text
    manifest = [json.loads(line) for line in (directory / "out" / "manifest.jsonl").read_text().splitlines()]
    assert sorted(entry["url"] for entry in manifest) == sorted(urls)
    for entry in manifest:
        stored = (directory / "out" / entry["path"]).read_bytes()
        assert hashlib.sha256(stored).hexdigest() == entry["sha256"]
        assert stored == f"page {urlsplit(entry['url']).path}".encode()

    first, second = (directory / "out" / entry["path"] for entry in manifest[:2])
    first.write_bytes(b"tampered")
    second.unlink()
    code, output = await run(*arguments, cwd=directory)
    assert code == 0, output
    assert "3 artifacts of the matching jobs: 2 downloaded, 1 already there, 0 failed" in output
    assert hashlib.sha256(first.read_bytes()).hexdigest() == manifest[0]["sha256"]
    assert not list((directory / "out").rglob("*.part"))
    code, output = await run(*arguments, "--json", cwd=directory)
    assert code == 0, output
    assert json.loads(output) == {
        "artifacts": 3,
        "directory": "out",
        "failures": [],
        "downloaded": 0,
        "already_there": 3,
        "failed": 0,
    }
    (directory / "a-file").write_text("not a directory")
    for target, said in (("a-file", "is a file; give a directory"), ("a-file/below", "cannot write there")):
        code, output = await run(*arguments[:-1], target, cwd=directory)
        assert code == 2, output
        assert f"--to {target}: {said}" in output
        assert "Traceback" not in output


async def test_list_pages_through_any_limit_and_submit_from_names_each_rejected_line(dev: tuple[Path, str]):
    directory, _ = dev
    (directory / "rejected.txt").write_text("".join(f"ftp://example.com/{n}\n" for n in range(520)))
    code, output = await run("submit", "--from", "rejected.txt", "--caller", "pager", cwd=directory)
    assert code == 1
    assert "line 1: ftp://example.com/0 rejected UNSUPPORTED_SCHEME" in output
    assert "line 520: ftp://example.com/519 rejected UNSUPPORTED_SCHEME" in output
    code, output = await run("list", "--caller", "pager", "--limit", "510", "--json", cwd=directory)
    assert code == 0, output
    listed = json.loads(output)
    assert len({job["job_id"] for job in listed["items"]}) == 510
    assert listed["next_cursor"]
    code, output = await run("list", "--caller", "pager", "--limit", "5000", "--json", cwd=directory)
    assert code == 0, output
    assert len(json.loads(output)["items"]) == 520
    assert json.loads(output)["next_cursor"] is None


@pytest.mark.timeout(300)
async def test_watch_since_prints_what_finished_before_it_started_then_what_finishes_after(
    dev: tuple[Path, str], origin: Origin, terminals: Any
):
    directory, web_url = dev
    await settled(web_url)  # what this module's other tests submitted has finished before `started`
    await asyncio.sleep(1.5)
    started = datetime.now(UTC).isoformat()
    code, output = await run("submit", origin.url("/page/watch-before"), "--wait", "--json", cwd=directory)
    assert code == 0, output
    before = json.loads(output)["job_id"]
    await asyncio.sleep(1.5)  # the next completions are written at a later millisecond than `now`
    now = datetime.now(UTC).isoformat()

    since_then = await terminals("watch", "--since", started, "--json", cwd=directory)
    since_now = await terminals("watch", "--since", now, "--json", cwd=directory)
    await since_then.read_until(before)
    code, output = await run("submit", origin.url("/page/watch-after"), "--wait", "--json", cwd=directory)
    assert code == 0, output
    after = json.loads(output)["job_id"]
    for terminal in (since_then, since_now):
        await terminal.read_until(after)
        terminal.interrupt()
        await terminal.finish()
    assert since_then.text.index(before) < since_then.text.index(after)
    assert before not in since_now.text


async def test_escape_sequences_in_a_file_reach_the_terminal_escaped(dev):
    directory, _ = dev
    hostile = directory / "hostile.jsonl"
    lines = [
        json.dumps({"url": "https://example.com/", "\x1b[2J\x1b]0;owned\x07": 1}),
        json.dumps({"url": "https://example.com/\x1b[31mred"}),
        '{"url": "\x1b[8m',
    ]
    hostile.write_text("\n".join(lines) + "\n")
    code, output = await run("submit", "--from", str(hostile), cwd=directory)
    assert code == 1, output
    for sequence in ("\x1b[2J", "\x1b]0;", "\x1b[31m", "\x1b[8m"):
        assert sequence not in output, output
    assert "\\x1b[2J" in output  # named, escaped


async def test_listings_fit_eighty_columns(dev: tuple[Path, str], origin: Origin, monkeypatch):
    """`list`, `routes` and `top` at 80 columns: every column whole or cut with an ellipsis, no
    line wrapped, and `list`'s cursor on a line of its own, to be copied whole."""
    directory, base = dev
    monkeypatch.setenv("COLUMNS", "80")
    code, output = await run("submit", origin.url("/page/eighty"), "--wait", cwd=directory)
    assert code == 0, output
    long_path = "/missing/" + "a-long-path-segment/" * 6
    code, output = await run("submit", origin.url(long_path), "--wait", cwd=directory)
    assert code == 1, output  # a 404: DEAD_LETTER, the widest state, and the newest job
    code, listed = await run("list", "--limit", "1", cwd=directory)
    assert code == 0, listed
    lines = listed.splitlines()
    assert lines[0].split() == ["job", "state", "type", "url", "accepted"], listed
    row = r"DEAD_LETTER\s+http\.fetch\s+http://127\.0\.0\.1:\d+/missing/\S*…\s+\d\d:\d\d:\d\d$"
    assert re.search(row, lines[1]), listed
    async with httpx.AsyncClient() as client:
        asked = {"limit": 1, "checks": "false"}  # as `list` asks, monitors' checks left out
        cursor = (await client.get(f"{base}/jobs", params=asked)).json()["next_cursor"]
    assert lines[-1] == cursor, listed
    assert "--cursor" in lines[-2]
    code, routes = await run("routes", cwd=directory)
    assert code == 0, routes
    headers = ["route", "kind", "spent", "budget", "left", "rate/s", "held", "granted"]
    assert routes.splitlines()[0].split() == headers, routes
    assert re.search(r"^direct\s+direct\s+not metered\s+none", routes, re.MULTILINE), routes
    code, once = await run("top", "--once", cwd=directory)
    assert code == 0, once
    assert re.search(r"^\s*route\s+spent\s+budget\s+rate/s\s+held\s*$", once, re.MULTILINE), once
    assert re.search(r"^\s*direct\s+not metered\s+none", once, re.MULTILINE), once
    for text in (listed, routes, once):
        assert all(len(line) <= 80 for line in text.splitlines() if line != cursor), text
