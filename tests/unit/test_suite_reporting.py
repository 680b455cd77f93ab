"""The test command says what it runs before it starts, and a line as each phase ends."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent


def test_the_suite_says_what_it_runs_and_when_each_phase_is_done():
    arguments = ["-p", "no:cacheprovider", "-n", "0", "--broker", "tansu", "tests/unit/test_moments.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *arguments], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stdout
    assert "static gates first (ruff check, ruff format, mypy --strict, import contracts)" in done.stdout
    assert "brokers tansu (embedded)" in done.stdout
    assert re.search(r"browser (/\S+|none)", done.stdout)
    assert re.search(r"phase unit done: \d+ tests\n", done.stdout), done.stdout
