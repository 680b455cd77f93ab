"""docs/OPERATIONS.md's one-node recipe as a user pastes it: its Kafka block names the release the
suite runs (the session's one Apache Kafka node stands in for the download, which needs the
internet), and its scrapestream block runs as written against that node, to a succeeded job."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import uuid
from pathlib import Path

import pytest
from aiohttp import web

from bench.kafka import KAFKA_VERSION
from streams.broker.embedded import free_loopback_port
from tests.servers import loopback

pytestmark = pytest.mark.kafka_only
PAGE = "<html><body><h1>Example Domain</h1></body></html>"
OPERATIONS = (Path(__file__).parent.parent.parent / "docs" / "OPERATIONS.md").read_text()


def recipe() -> list[str]:
    start = OPERATIONS.index("## Trying it on one Apache Kafka node")
    end = OPERATIONS.index("\n## ", start + 1)
    return re.findall(r"```bash\n(.*?)```", OPERATIONS[start:end], flags=re.DOTALL)


def test_the_kafka_block_is_the_release_the_suite_runs():
    kafka, *_ = recipe()
    release = f"kafka_2.13-{KAFKA_VERSION}"
    assert f"https://archive.apache.org/dist/kafka/{KAFKA_VERSION}/{release}.tgz" in kafka
    assert f"{release}/bin/kafka-storage.sh format --standalone" in kafka
    assert f"{release}/bin/kafka-server-start.sh -daemon {release}/config/server.properties" in kafka


@pytest.mark.asyncio(loop_scope="module")
async def test_the_scrapestream_block_runs_as_pasted_to_a_succeeded_job(broker, tmp_path):
    _, block, *_ = recipe()
    port = free_loopback_port()

    async def page(request: web.Request) -> web.Response:
        return web.Response(
            text="<html><body><h1>Example Domain</h1></body></html>", content_type="text/html"
        )

    async with loopback(page) as origin:
        script = (
            block.replace("\\\n", " ")
            .replace("localhost:9092", broker.bootstrap)
            .replace("127.0.0.1:8080", f"127.0.0.1:{port}")
            .replace("https://example.com/", f"http://127.0.0.1:{origin}/")
        )
        (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
        environment = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPESTREAM_")} | {
            "SCRAPESTREAM_TOPIC_PREFIX": f"recipe-{uuid.uuid4().hex[:8]}",  # the session broker is shared
            "SCRAPESTREAM_WEB_PORT": str(port),
            "SCRAPESTREAM_ALLOW_PRIVATE_NETWORKS": "true",  # the stand-in for example.com is on loopback
            "SCRAPESTREAM_PROCESSES": "1",
        }
        process = await asyncio.create_subprocess_exec(
            "bash", "-e", "-c", script + "\nkill %1; wait || true\n", cwd=tmp_path, env=environment,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            output, _ = await asyncio.wait_for(process.communicate(), 240)
        finally:
            if process.returncode is None:
                os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
    said = output.decode()
    log = (tmp_path / "worker.log").read_text() if (tmp_path / "worker.log").exists() else ""
    assert process.returncode == 0, said + log
    assert "SUCCEEDED" in said
    assert re.search(r"SUCCEEDED\s+http\.fetch\s+http://127\.0\.0\.1", said), said
    assert "Traceback" not in said + log
