"""The static gates run as part of the suite, first: ruff, ruff format, mypy --strict, import contracts."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.static


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        ["mypy"],
        ["lint-imports"],
    ],
    ids=["ruff", "ruff-format", "mypy", "import-contracts"],
)
def test_the_code_passes(command):
    result = subprocess.run(
        [str(BIN / command[0]), *command[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


MOST_CLASS_LINES = 300


def test_no_class_of_the_shell_is_over_300_lines():
    """A class past this does more than one thing: its parts become classes or modules of their own."""
    over = [
        f"{path.relative_to(ROOT)}: {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in sorted((ROOT / "streams").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and (node.end_lineno or 0) - node.lineno + 1 > MOST_CLASS_LINES
    ]
    assert over == []


COMPOSITION = {"streams/web/context.py", "streams/web/api.py", "streams/worker.py"}


def test_web_handlers_reach_the_worker_only_through_their_ports():
    """`ApiContext` is the composition root: handlers ask for `reads_of`, `commands_of`, ... and are
    typed (and checked by mypy) against the narrow port they use."""
    reaching = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "streams").rglob("*.py"))
        if str(path.relative_to(ROOT)) not in COMPOSITION
        and (
            "ApiContext" in path.read_text().replace("`ApiContext`", "")
            or "state.context" in path.read_text()
        )
    ]
    assert reaching == []
