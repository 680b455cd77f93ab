"""The README's commands and example stay true: CI runs its test command, its code compiles."""

import ast
import re
import subprocess
from pathlib import Path

import pytest

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


def test_the_python_examples_compile_and_import_what_exists():
    for example in blocks("python"):
        tree = ast.parse(example)
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                module = __import__(node.module, fromlist=[alias.name for alias in node.names])
                assert all(hasattr(module, alias.name) for alias in node.names)


def test_the_signer_example_takes_the_key_as_principal_new_prints_it():
    from schemas.enums import ActorRole
    from streams.auth.issue import issue

    example = next(block for block in blocks("python") if "Signer(" in block)
    namespace: dict[str, object] = {}
    key = issue("svc-a", ActorRole.SERVICE).signing_key
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCRAPESTREAM_SIGNING_KEY", key)
        exec(compile(example, "README.md", "exec"), namespace)  # noqa: S102 - builds a client, connects to nothing
    signer = namespace["signer"]
    assert signer.private_key is not None  # type: ignore[attr-defined]


def test_the_settings_reference_is_generated_from_the_settings_model():
    from streams.settings_reference import reference

    operations = (ROOT / "docs" / "OPERATIONS.md").read_text()
    begin, end = "<!-- settings:begin -->\n", "<!-- settings:end -->"
    written = operations[operations.index(begin) + len(begin) : operations.index(end)]
    assert written == reference(), "run `python -m streams.settings_reference` into docs/OPERATIONS.md"
    python_only = ("Annotated", "StringConstraints", "FieldInfo", "Optional", "Union", "Literal", "dict[")
    assert not [name for name in python_only if name in written]  # types a reader of the table understands


def test_every_test_the_seed_rules_table_cites_exists():
    """docs/LIFECYCLE.md's seed rules cite tests by file and function; each must be there."""
    import re

    folders = {"u": "unit", "i": "integration", "c": "contract", "e": "e2e", "faults": "faults"}
    table = (ROOT / "docs" / "LIFECYCLE.md").read_text().split("## Seed rules", 1)[1]
    missing = []
    for row in (line for line in table.splitlines() if line.startswith("| ")):
        current = None
        for cited in re.findall(r"`([^`]*::[^`]*|(?:u|i|c|e|faults)/[^`]*\.py)`", row):
            file_part, _, name = cited.partition("::")
            if file_part:
                folder, _, file_name = file_part.partition("/")
                current = ROOT / "tests" / folders[folder] / file_name
            assert current is not None, row
            if name and f"def {name}(" not in current.read_text():
                missing.append(f"{current.name}::{name}")
    assert missing == []


def test_the_id_formulas_in_the_contract_are_the_ones_jobs_and_monitors_get():
    import uuid
    from datetime import UTC, datetime

    from projections.lifecycle.monitors import monitor_id_for
    from projections.lifecycle.submission import submission_identity
    from schemas.commands import SubmitJob
    from schemas.records import Request

    contract = (ROOT / "docs" / "CONTRACT.md").read_text()
    (namespace,) = re.findall(
        r"`uuid5\(([0-9a-f-]{36}), caller_identity \+ \"\\n\" \+ idempotency_key", contract
    )
    (monitors,) = re.findall(r"`uuid5\(([0-9a-f-]{36}), caller_identity \+ \"\\n\" \+ name", contract)
    assert monitor_id_for("svc-a", "pricing") == uuid.uuid5(uuid.UUID(monitors), "svc-a\npricing")
    submission = SubmitJob(
        caller_identity="svc-a",
        idempotency_key="order-42",
        request=Request(url="https://example.com/"),
        deadline_at=datetime(2030, 1, 1, tzinfo=UTC),
    )
    documented = uuid.uuid5(uuid.UUID(namespace), "svc-a\norder-42")
    assert submission_identity(submission)[0] == documented


def test_the_contract_names_each_public_topic_rule_the_registry_is_given():
    from schemas.contract import PUBLIC_TOPICS

    contract = (ROOT / "docs" / "CONTRACT.md").read_text()
    for topic in PUBLIC_TOPICS:
        assert re.search(rf"`<prefix>\.{topic.topic}-value`.*`{topic.compatibility}`", contract), topic.topic


def test_what_the_readmes_examples_write_into_the_checkout_is_ignored_by_git():
    commands = "\n".join(re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL))
    written = re.findall(r"(?:> |-o )([\w./-]+)|--to ([\w.-]+)/", commands)
    paths = sorted({file or f"{folder}/example" for file, folder in written})
    assert "urls.txt" in paths
    ignored = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True, text=True)
    assert sorted(ignored.stdout.split()) == paths
