"""Other teams' own clients (Java: kafka-clients and Avro; Python: confluent-kafka and fastavro) use
the Kafka contract with auth on: they submit signed, match every answer, read their completion with
`read_committed` and fetch its artifact from the API, with no scrapestream code (checked)."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from schemas.registry import bundle_path
from tests.brokers import ROOT
from tests.clients import INTEROP
from tests.e2e.cluster import auth_on
from tests.e2e.conftest import System, running_system
from tests.principals import ISSUED

OUR_PACKAGES = {"streams", "schemas", "projections", "tests"}


def client_env(system: System, origin, name: str) -> dict[str, str]:
    assert system.worker is not None
    return os.environ | {
        "BOOTSTRAP": system.settings.kafka_bootstrap,
        "TOPIC_PREFIX": system.settings.topic_prefix,
        "DEPLOYMENT": system.settings.deployment_id,
        "PRINCIPAL": "svc-a",
        "SIGNING_KEY": ISSUED["svc-a"].signing_key,
        "API_URL": f"http://127.0.0.1:{system.worker.web_port}",
        "API_TOKEN": ISSUED["svc-a"].token,
        "PAGE_URL": origin.url(f"/page/{name}"),
        "OTHER_URL": origin.url(f"/page/{name}-other"),
        "BUNDLE": str(bundle_path()),
    }


async def run_client(command: list[str], env: dict[str, str]) -> dict[str, dict]:
    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode == 0, err.decode()[-4000:]
    seen = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    return {case["case"]: case for case in seen}


def assert_answered_and_completed(seen: dict[str, dict], prefix: str) -> None:
    assert {case: seen[case]["answer"] for case in seen if case != "completion"} == {
        "created": "CREATED",
        "repeated": "REPEATED",
        "reused_key": "REJECTED",
        "undecodable": "DEAD_INPUT",
        "unsigned": "DEAD_INPUT",
    }
    for case in ("created", "repeated", "reused_key", "undecodable", "unsigned"):
        assert seen[case]["correlation_id"] == f"{prefix}-{case}"
    created, completion = seen["created"], seen["completion"]
    assert created["command_id"] == completion["command_id"]
    assert seen["repeated"]["job_id"] == created["job_id"] == completion["job_id"]
    assert seen["reused_key"]["rejection"] == "IDEMPOTENCY_KEY_REUSED"
    assert "unsigned" in seen["unsigned"]["reason"]
    assert "undecodable" in seen["undecodable"]["reason"]
    assert completion["status"] == "SUCCEEDED"
    assert completion["artifacts"] >= 1
    assert completion["artifact_sha256_matches"] is True


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.kafka_only
async def test_a_java_team_submits_matches_answers_and_fetches_its_artifact(deployment, origin, java_client):
    seen = await run_client([*java_client, "client"], client_env(deployment, origin, "java"))
    assert_answered_and_completed(seen, "java")


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.kafka_only
async def test_a_python_team_with_confluent_kafka_and_fastavro_does_the_same(deployment, origin):
    client = [sys.executable, str(INTEROP / "python_client.py")]
    seen = await run_client(client, client_env(deployment, origin, "python"))
    assert_answered_and_completed(seen, "python")


def assert_watched(seen: dict[str, dict]) -> None:
    """A monitor created on the submit topic, answered, and its first changes read from the changes topic."""
    assert seen["monitor"]["answer"] == "CREATED"
    assert seen["monitor"]["kinds"] == ["NEW", "CHANGED"]


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.kafka_only
async def test_a_java_team_runs_a_monitor_on_the_submit_topic_and_reads_its_changes(
    deployment, origin, java_client
):
    env = client_env(deployment, origin, "java") | {"WATCH_URL": origin.url("/visits/java")}
    assert_watched(await run_client([*java_client, "monitor"], env))


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.kafka_only
async def test_a_python_team_runs_a_monitor_on_the_submit_topic_and_reads_its_changes(deployment, origin):
    client = [sys.executable, str(INTEROP / "python_client.py"), "monitor"]
    env = client_env(deployment, origin, "python") | {"WATCH_URL": origin.url("/visits/python")}
    assert_watched(await run_client(client, env))


def assert_reads_every_golden_record(*round_trip: str) -> None:
    """`round_trip GOLDEN HISTORY` decodes every golden record and re-encodes the current ones."""
    golden, history = ROOT / "tests" / "golden", ROOT / "schemas" / "avsc" / "history"
    done = subprocess.run(
        [*round_trip, str(golden), str(history)], capture_output=True, text=True, timeout=300, check=True
    )
    counts = json.loads(done.stdout)
    assert counts["decoded"] == sum(len(path.read_text().splitlines()) for path in golden.glob("*.jsonl"))
    assert counts["rewritten"] > 0


def test_the_java_classes_generated_from_the_bundle_read_every_golden_record(java_client):
    assert_reads_every_golden_record(*java_client, "roundtrip")


def test_fastavro_alone_reads_every_golden_record_with_the_bundle():
    assert_reads_every_golden_record(
        sys.executable, str(INTEROP / "python_client.py"), "roundtrip", str(bundle_path())
    )


@pytest.mark.parametrize("client", ["python_client.py", "../remote_executor.py"])
def test_the_foreign_clients_import_no_scrapestream_code(client):
    tree = ast.parse((INTEROP / client).read_text())
    imported = {
        (node.module or "").split(".")[0] if isinstance(node, ast.ImportFrom) else alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert not imported & OUR_PACKAGES
    java = (INTEROP / "java" / "src").rglob("*.java")
    assert all("streams." not in path.read_text() for path in java)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def registry_deployment(broker, schema_registry, tmp_path_factory) -> AsyncIterator[System]:
    data_dir = tmp_path_factory.mktemp("interop-registry")
    named = {"deployment_id": "interop-registry-tests", "schema_registry_url": schema_registry}
    settings = auth_on(broker.bootstrap, data_dir, **named)
    async with running_system(settings) as system:
        yield system


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.kafka_only
async def test_a_team_with_schema_registry_serializers_submits_and_reads_in_the_confluent_framing(
    registry_deployment, origin, schema_registry
):
    client = [sys.executable, str(INTEROP / "python_client.py")]
    env = client_env(registry_deployment, origin, "registry") | {"REGISTRY_URL": schema_registry}
    seen = await run_client(client, env)
    assert_answered_and_completed(seen, "python")
    completions = registry_deployment.completions.raw
    assert completions
    assert all(record.value[:1] == b"\x00" for record in completions)
