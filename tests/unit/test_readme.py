"""The README's commands and example stay true: CI runs its test command, its code compiles."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent
README = (ROOT / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def test_ci_runs_the_readme_test_command_exactly_once():
    test_command = next(block.strip() for block in blocks("bash") if "pytest" in block)
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.count(test_command) == 1
    assert ci.count("pip install") == 1


def test_the_readme_run_command_starts_dev():
    assert "scrapestream dev" in blocks("bash")[0]


def test_the_python_example_imports_what_exists():
    (example,) = blocks("python")
    tree = ast.parse(example)
    namespace: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            module = __import__(node.module, fromlist=[alias.name for alias in node.names])
            for alias in node.names:
                namespace[alias.name] = getattr(module, alias.name)
    assert {"Client", "SubmitJob", "Request", "KAFKA"} <= set(namespace)
    exec(compile(example, "README.md", "exec"), namespace)  # noqa: S102 - defines fetch_one only
    assert callable(namespace["fetch_one"])


def test_every_setting_is_documented_in_the_readme():
    from streams.settings import Settings

    missing = [name for name in Settings.model_fields if f"SCRAPESTREAM_{name.upper()}" not in README]
    assert not missing, missing
