"""What the CLI says, and how it exits, when a command cannot be carried out, run as a user runs it."""

import base64
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from schemas.enums import ActorRole
from streams.auth.issue import issue
from streams.cli.main import _parser

SCRAPESTREAM = str(Path(sys.executable).with_name("scrapestream"))


def run(*arguments: str, cwd: Path, **settings: str) -> tuple[int, str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("SCRAPESTREAM_")}
    environment |= settings
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


def test_a_new_callback_secret_is_one_workers_and_callbacks_key_take(tmp_path):
    code, printed = run("callbacks", "new-secret", cwd=tmp_path)
    assert code == 0
    secret = printed.strip()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
    environment = {"SCRAPESTREAM_CALLBACK_SECRET": secret}
    code, keys = run("callbacks", "key", "--caller", "cli", cwd=tmp_path, **environment)
    assert code == 0, keys
    assert keys.startswith("generation 1: whsec_")


def test_callbacks_key_without_a_secret_says_what_this_shell_and_a_dev_here_know(tmp_path):
    code, said = run("callbacks", "key", "--caller", "cli", cwd=tmp_path)
    assert code == 2
    assert "not set in this shell" in said
    assert "callbacks new-secret" in said
    state = {"pid": os.getpid(), "callbacks": "signed with SCRAPESTREAM_CALLBACK_SECRET"}
    (tmp_path / ".scrapestream").mkdir()
    (tmp_path / ".scrapestream" / "dev.json").write_text(json.dumps(state))  # a dev that runs here
    code, said = run("callbacks", "key", "--caller", "cli", cwd=tmp_path)
    assert code == 2
    assert "the `scrapestream dev` running here signs its callbacks" in said


def test_every_issued_token_passes_as_the_value_of_token():
    for _ in range(500):  # before the prefix, about one token in 64 began with "-"
        token = issue("someone", ActorRole.OPERATOR).token
        assert _parser().parse_args(["get", "x", "--token", token]).token == token


def test_a_value_taken_for_an_option_says_how_to_give_it(tmp_path):
    code, said = run("get", "x", "--token", "-abc", cwd=tmp_path)
    assert code == 2
    assert "a value beginning with '-' is given as --token=VALUE" in said
    code, said = run("get", "x", "--token=-abc", "--url", f"http://127.0.0.1:{dead_port()}", cwd=tmp_path)
    assert "expected one argument" not in said
