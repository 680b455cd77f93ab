"""A Node team's own client (kafkajs and avsc, no custom codec, no scrapestream code) uses the Kafka
contract: it submits signed, matches every answer, reads its completion and artifact, and reads 200
completions from the topic's beginning in one consumer. The same reader dies on zstd batches, which
is why the public topics are written with gzip: the negative case proves the check can fail."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from uuid import uuid4

import pytest
import pytest_asyncio

from schemas.commands import SubmitJob
from schemas.records import Request
from schemas.registry import bundle_path
from streams.broker.clients import kafka_producer
from streams.broker.compat import start_whole
from streams.clock import utc_now
from tests import brokers
from tests.brokers import ROOT, fresh_topics
from tests.clients import NODE
from tests.e2e.conftest import System, running_system, worker_settings
from tests.interop.test_foreign_clients import (
    assert_answered_and_completed,
    assert_watched,
    client_env,
    run_client,
)

COMPLETIONS = 200


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.kafka_only
async def test_a_node_team_with_kafkajs_submits_matches_answers_and_fetches_its_artifact(
    deployment, origin, node_client
):
    seen = await run_client([*node_client, "client"], client_env(deployment, origin, "node"))
    assert_answered_and_completed(seen, "node")


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.kafka_only
async def test_a_node_team_runs_a_monitor_on_the_submit_topic_and_reads_its_changes(
    deployment, origin, node_client
):
    env = client_env(deployment, origin, "node") | {"WATCH_URL": origin.url("/visits/node")}
    assert_watched(await run_client([*node_client, "monitor"], env))


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def busy(broker: brokers.TestBroker, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[System]:
    """A deployment that has completed `COMPLETIONS` jobs, ended in bursts as a busy one ends them."""
    settings = worker_settings(broker.bootstrap, tmp_path_factory.mktemp("node-busy"))
    async with running_system(settings) as system:
        yield system


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.kafka_only
async def test_kafkajs_reads_two_hundred_completions_from_the_beginning_in_one_consumer(
    busy: System, origin, node_client
):
    deadline = utc_now() + timedelta(minutes=5)
    commands = [
        SubmitJob(
            caller_identity="node", request=Request(url=origin.url(f"/page/node-{n}")), deadline_at=deadline
        )
        for n in range(COMPLETIONS)
    ]
    await busy.client.submit_all(commands)
    await busy.completions.wait_for(lambda seen: len(seen) >= COMPLETIONS, 180)
    env = os.environ | {
        "BOOTSTRAP": busy.settings.kafka_bootstrap,
        "TOPIC_PREFIX": busy.settings.topic_prefix,
        "BUNDLE": str(bundle_path()),
    }
    seen = await run_client([*node_client, "completions", str(COMPLETIONS)], env)
    assert seen["completions"]["read"] == COMPLETIONS
    assert busy.worker is not None  # and the batches it read were compressed, not only small ones
    written = busy.worker.counters[f"produced.bytes.{busy.settings.topic('completions')}"]
    assert written < 0.8 * sum(len(raw.value) for raw in busy.completions.raw)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.kafka_only
async def test_the_same_reader_dies_on_zstd_batches(busy: System, broker: brokers.TestBroker, node_client):
    settings = await fresh_topics(broker)
    records = [raw.value for raw in busy.completions.raw[:COMPLETIONS]]
    producer = kafka_producer(broker.access, compression_type="zstd", linger_ms=50)
    await start_whole(producer.start, producer.stop)
    try:
        sent = [
            await producer.send(settings.topic("completions"), value, key=uuid4().bytes) for value in records
        ]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()
    env = os.environ | {
        "BOOTSTRAP": broker.bootstrap,
        "TOPIC_PREFIX": settings.topic_prefix,
        "BUNDLE": str(bundle_path()),
    }
    process = await asyncio.create_subprocess_exec(
        *node_client,
        "completions",
        str(len(records)),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    async with asyncio.timeout(300):
        out, err = await process.communicate()
    assert process.returncode != 0, out.decode()
    assert "ZSTD" in err.decode(), err.decode()[-2000:]


def test_the_node_client_imports_no_scrapestream_code():
    source = (NODE / "client.mjs").read_text()
    imported = {
        line.split(" from ")[-1].strip(' ";') for line in source.splitlines() if line.startswith("import ")
    }
    assert imported <= {"node:crypto", "node:fs", "avsc", "kafkajs"}
    assert json.loads((NODE / "package.json").read_text())["dependencies"].keys() == {"avsc", "kafkajs"}


def test_the_node_client_frames_records_as_the_golden_ones(node_client):
    golden = Path(ROOT / "tests" / "golden")
    newest = max(golden.glob("records-v*.jsonl"), key=lambda path: int(path.stem.rsplit("v", 1)[1]))
    env = os.environ | {"BUNDLE": str(bundle_path())}
    checking = [*node_client, "fingerprints", str(newest)]
    done = subprocess.run(checking, capture_output=True, text=True, timeout=60, check=True, env=env)
    assert json.loads(done.stdout)["checked"] == len(newest.read_text().splitlines())
