"""What the CLI says, and how it exits, when a command cannot be carried out, run as a user runs it."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SCRAPESTREAM = str(Path(sys.executable).with_name("scrapestream"))


def run(*arguments: str, cwd: Path) -> tuple[int, str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("SCRAPESTREAM_")}
    done = subprocess.run(
        [SCRAPESTREAM, *arguments], cwd=cwd, env=environment, capture_output=True, text=True, timeout=60
    )
    return done.returncode, done.stdout + done.stderr


def dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("deadline", ["-5", "0", "nan", "soon"])
def test_a_deadline_not_after_now_is_the_commands_mistake(tmp_path, deadline):
    code, said = run("submit", "https://example.com/", f"--deadline-s={deadline}", cwd=tmp_path)
    assert code == 2
    assert "is not a number of seconds from now above 0" in said


def test_a_named_api_that_does_not_answer_is_not_blamed_on_a_missing_dev(tmp_path):
    url = f"http://127.0.0.1:{dead_port()}"
    code, said = run("get", "00000000-0000-4000-8000-000000000000", "--url", url, cwd=tmp_path)
    assert code == 1
    assert f"cannot reach the scrapestream API at {url}" in said
    assert "is a worker running there" in said
    assert "scrapestream dev" not in said
