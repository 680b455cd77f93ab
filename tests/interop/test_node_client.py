"""A Node team's own client (kafkajs and avsc, no custom codec, no scrapestream code) uses the Kafka
contract: it submits signed, matches every answer, reads its completion and artifact, and reads 200
completions from the topic's beginning in one consumer (the public topics are gzip; kafkajs has no
zstd codec)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from schemas.registry import bundle_path
from tests.brokers import ROOT
from tests.clients import NODE

COMPLETIONS = 200


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
