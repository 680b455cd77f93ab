"""`scrapestream dev` as a user runs it: a subprocess, `submit --wait` from another, Ctrl-C to stop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from streams.supervisor.count import process_count
from tests.commands import run, start

pytestmark = pytest.mark.asyncio(loop_scope="module")


def read_json(path: Path) -> dict[str, object] | None:
    return json.loads(path.read_text()) if path.exists() else None


async def wait_for_file(path: Path) -> dict[str, object]:
    for _ in range(600):
        state = read_json(path)
        if state is not None:
            return state
        await asyncio.sleep(0.1)
    raise AssertionError(f"{path} never appeared")


async def test_dev_serves_a_submission_end_to_end_and_stops_cleanly(origin, tmp_path, monkeypatch):
    from streams.broker.embedded import free_loopback_port

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")  # spans into dev's terminal, a line each
    port = free_loopback_port()
    dev = await start("dev", "--allow-private", cwd=tmp_path, web_port=str(port), processes="auto")
    try:
        state = await wait_for_file(tmp_path / ".scrapestream" / "dev.json")
        assert state["web_url"] == f"http://127.0.0.1:{port}"
        code, output = await run("submit", origin.url("/page/dev"), "--wait", "--json", cwd=tmp_path)
        assert code == 0, output
        completion = json.loads(output)
        assert completion["status"] == "SUCCEEDED"
        assert completion["submission"] == "created"
        async with httpx.AsyncClient(base_url=str(state["web_url"])) as http:
            job = (await http.get(f"/jobs/{completion['job_id']}")).json()
        assert job["state"] == "SUCCEEDED"
        assert job["artifacts"][0]["sha256"] == completion["artifacts"][0]["sha256"]
        stored = job["artifacts"][0]
        code, output = await run("artifact", stored["download_path"], cwd=tmp_path)
        assert code == 0, output
        assert f"sha256 {stored['sha256']} (checked)" in output
        assert (tmp_path / f"{stored['artifact_id']}.html").read_bytes() == b"page /page/dev"
        code, output = await run("artifact", stored["artifact_id"], "-o", "page.html", cwd=tmp_path)
        assert (tmp_path / "page.html").read_bytes() == b"page /page/dev"
        code, output = await run("artifact", "not-an-id", cwd=tmp_path)
        assert code == 2
        assert "is no artifact id" in output
        code, output = await run("submit", origin.url("/page/dev"), cwd=tmp_path)
        assert code == 0, output
        assert f"job {completion['job_id']}: reused" in output
        code, output = await run("submit", origin.url("/page/dev-plain"), "--wait", cwd=tmp_path)
        assert code == 0
        assert "SUCCEEDED" in output
        code, output = await run("submit", "ftp://example.com/file", "--wait", cwd=tmp_path)
        assert code == 1
        assert "rejected UNSUPPORTED_SCHEME" in output
        hook = origin.url("/hook/0/dev")
        code, output = await run(
            "submit", origin.url("/page/hooked"), "--callback-url", hook, "--wait", cwd=tmp_path
        )
        assert code == 0, output
        headers, _ = await delivered(origin, "/hook/0/dev")
        assert headers["webhook-id"].startswith("msg_")  # what receivers dedupe by, signed or not
        assert headers["webhook-timestamp"].isdigit()
        assert "webhook-signature" not in headers  # dev has no callback secret: unsigned, as it says
        code, output = await run("topics", "describe", cwd=tmp_path)
        assert code == 0, output
        assert state["processes"] == process_count("auto")  # a process a core (here: 2 in CI)
        assert f"scrapestream.commands: {state['processes']} partitions" in output  # one a process
        code, output = await run("topics", "check", cwd=tmp_path)
        assert code == 0, output
        await the_cli_reads_and_acts_through_the_api(tmp_path, completion["job_id"])
        await mistakes_get_clear_answers(tmp_path, origin)
    finally:
        if dev.returncode is None:
            dev.send_signal(signal.SIGINT)
        printed, _ = await asyncio.wait_for(dev.communicate(), 60)
    assert dev.returncode == 0, printed.decode()
    assert "started from a clean state" in printed.decode()
    assert "callbacks        unsigned (no SCRAPESTREAM_CALLBACK_SECRET)" in printed.decode()
    assert "tracing          on: console, a line per span" in printed.decode()
    spans = [line for line in printed.decode().splitlines() if line.startswith("span scrapestream ")]
    intake = r"span scrapestream intake trace=[0-9a-f]{32} \d+\.\d ms job=[0-9a-f-]{36}"
    assert any(re.fullmatch(intake, line) for line in spans), spans
    assert any(line.endswith(f" job={completion['job_id']}") for line in spans), spans
    assert '"context": {' not in printed.decode()  # not the SDK's 35-line JSON per span
    assert not (tmp_path / ".scrapestream" / "dev.json").exists()
    with pytest.raises(ProcessLookupError):
        os.kill(int(state["broker_pid"]), 0)


async def delivered(origin: Any, path: str) -> tuple[dict[str, str], bytes]:
    for _ in range(600):
        if origin.callbacks[path]:
            found: tuple[dict[str, str], bytes] = origin.callbacks[path][0]
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"no callback reached {path}")


async def the_cli_reads_and_acts_through_the_api(directory: Path, job_id: str) -> None:
    code, output = await run("get", job_id, cwd=directory)
    assert code == 0, output
    assert "SUCCEEDED" in output
    assert "/artifacts/" in output
    code, output = await run("list", "--state", "SUCCEEDED", "--json", cwd=directory)
    assert code == 0, output
    assert job_id in {job["job_id"] for job in json.loads(output)["items"]}
    code, output = await run("events", job_id, cwd=directory)
    assert code == 0, output
    assert "JobAccepted" in output
    assert "JobSucceeded" in output
    code, output = await run("cancel", job_id, "--reason", "too late", cwd=directory)
    assert code == 1
    assert "409 conflict: job is already SUCCEEDED" in output
    watcher = await start("watch", "--from-beginning", "--json", cwd=directory)
    try:
        assert watcher.stdout is not None
        line = await asyncio.wait_for(watcher.stdout.readline(), 30)
        assert json.loads(line)["status"] in {"SUCCEEDED", "REJECTED", "DEAD_LETTER", "CANCELLED"}
    finally:
        watcher.terminate()
        await watcher.wait()
    code, output = await run("get", "not-a-job", cwd=directory)
    assert code == 2
    assert "neither a job id nor the start of one" in output
    assert "Traceback" not in output
    code, output = await run("get", job_id[:8], cwd=directory)  # the short id `list` prints
    assert code == 0, output
    assert job_id in output
    code, output = await run("list", cwd=directory)
    assert code == 0, output
    assert job_id[:8] in output
    assert max(len(line) for line in output.splitlines()) <= 80


async def mistakes_get_clear_answers(directory: Path, origin: Any) -> None:
    """What a new user meets first, answered with the reason and an exit code that says it."""
    code, output = await run("submit", "ftp://example.com/other", cwd=directory)
    assert code == 1
    rejected_id = output.split()[1].rstrip(":")
    assert "rejected UNSUPPORTED_SCHEME: scheme 'ftp' is not http or https" in output
    code, output = await run("get", rejected_id, cwd=directory)
    assert code == 0, output
    assert "REJECTED" in output
    assert "UNSUPPORTED_SCHEME" in output
    code, output = await run("list", "--state", "REJECTED", "--json", cwd=directory)
    assert rejected_id in {job["job_id"] for job in json.loads(output)["items"]}
    code, output = await run(
        "submit", origin.url("/slow/waited"), "--wait", "--timeout-s", "3", cwd=directory
    )
    assert code == 3, output
    assert "did not complete within 3 s" in output
    assert "attempt 1 running" in output or "leased: attempt 1" in output  # where it was meanwhile
    code, output = await run("events", rejected_id, cwd=directory)
    assert "UNSUPPORTED_SCHEME" in output
    waiting = await start("submit", origin.url("/slow/interrupted"), "--wait", cwd=directory)
    await asyncio.sleep(4)
    waiting.send_signal(signal.SIGINT)
    printed, _ = await asyncio.wait_for(waiting.communicate(), 30)
    assert waiting.returncode == 130
    assert b"Traceback" not in printed


async def test_a_submit_help_shows_every_option_with_its_default(tmp_path):
    code, output = await run("submit", "--help", cwd=tmp_path)
    assert code == 0
    for option in ("--type", "--capture", "--transport", "--policy-class", "--cache-mode", "--retention"):
        assert option in output
    assert "default: http.fetch" in output
    assert "default: 3600.0" in output
    flat = " ".join(output.split())
    assert "default: None" not in flat
    assert "default: False" not in flat
    for said in ("(default: RAW_BODY)", "(default: 3600.0)", "(default: 300.0)"):
        assert flat.count(said) == 1, flat  # each default said once


async def test_a_bad_choice_or_an_unknown_option_is_named_by_its_command(tmp_path):
    code, output = await run("submit", "https://example.com/", "--capture", "BAD", cwd=tmp_path)
    assert code == 2
    assert "invalid choice: 'BAD' (choose from 'RAW_BODY', 'METADATA_ONLY'" in output
    assert "CaptureMode" not in output
    for named, unknown, command in (
        ("get", "--bogus", ("get", "--bogus", "x")),
        ("callbacks replay", "-z", ("callbacks", "replay", "--since", "1h", "--reason", "r", "-z")),
    ):
        code, output = await run(*command, cwd=tmp_path)
        assert code == 2
        assert f"usage: scrapestream {named} [-h]" in output, output
        assert f"scrapestream {named}: error: unrecognized arguments: {unknown}" in output
        assert "{dev,worker" not in output  # not the top-level usage
    code, output = await run("list", "--limit", "0", cwd=tmp_path)
    assert code == 2
    assert "'0' is not a whole number above 0" in output


async def test_api_commands_naming_a_worker_that_does_not_answer_say_what_to_check(tmp_path):
    from streams.broker.embedded import free_loopback_port

    code, output = await run("list", "--url", f"http://127.0.0.1:{free_loopback_port()}", cwd=tmp_path)
    assert code == 1
    assert "is a worker running there, and is the address right?" in output
    assert "scrapestream dev" not in output  # the command named its worker: no dev is missing
    assert "Traceback" not in output


async def test_a_worker_on_the_embedded_broker_with_the_kafka_profile_says_which_setting_to_change(
    broker, tmp_path
):
    if broker.kind == "kafka":
        pytest.skip("the kafka profile is the right one on Kafka")
    code, output = await run(
        "worker",
        cwd=tmp_path,
        kafka_bootstrap=broker.bootstrap,
        auth_enabled="false",
        web_port="0",
        create_topics="true",
    )
    assert code == 1
    assert "SCRAPESTREAM_BROKER_PROFILE=embedded" in output
    assert "Traceback" not in output


async def test_a_worker_asked_for_exactly_once_on_a_broker_without_transactions_refuses_to_start(
    broker, tmp_path
):
    if broker.kind == "kafka":
        pytest.skip("Kafka has transactions")
    code, output = await run(
        "worker",
        cwd=tmp_path,
        kafka_bootstrap=broker.bootstrap,
        broker_profile="embedded",
        processing_guarantee="exactly_once",
        auth_enabled="false",
        web_port="0",
        create_topics="true",
    )
    assert code == 1
    assert "SCRAPESTREAM_PROCESSING_GUARANTEE=at_least_once" in output
    assert "cannot start a transactional producer" in output
    assert "Traceback" not in output


async def test_a_busy_web_port_and_a_missing_bucket_name_their_settings(broker, s3, tmp_path):
    from streams.broker.embedded import free_loopback_port

    common = {
        "kafka_bootstrap": broker.bootstrap,
        "broker_profile": broker.profile_name,
        "auth_enabled": "false",
    }
    port = free_loopback_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        code, output = await run("worker", cwd=tmp_path, web_port=str(port), **common)
    assert code == 2
    assert "SCRAPESTREAM_WEB_PORT" in output
    settings = s3.settings("no-such-bucket") | {"s3_create_bucket": "false"}
    code, output = await run(
        "worker", cwd=tmp_path, web_port="0", **common, **{k: str(v) for k, v in settings.items()}
    )
    assert code == 1
    assert "SCRAPESTREAM_S3_CREATE_BUCKET=true" in output


async def test_submit_and_watch_use_the_topic_prefix(origin, tmp_path):
    dev = await start("dev", "--allow-private", cwd=tmp_path, topic_prefix="custom")
    try:
        state = await wait_for_file(tmp_path / ".scrapestream" / "dev.json")
        assert state["topic_prefix"] == "custom"
        code, output = await run("submit", origin.url("/page/prefixed"), "--wait", cwd=tmp_path)
        assert code == 0, output
        prefixed = {"kafka_bootstrap": str(state["kafka_bootstrap"]), "broker_profile": "embedded"}
        code, output = await run(
            "submit",
            origin.url("/page/prefixed-env"),
            "--wait",
            cwd=tmp_path,
            topic_prefix="custom",
            **prefixed,
        )
        assert code == 0, output
        # A prefix nobody provisioned is named, and no topic is created for it.
        code, output = await run(
            "submit", origin.url("/page/unprovisioned"), cwd=tmp_path, topic_prefix="typo", **prefixed
        )
        assert code != 0
        assert "topic typo." in output
        assert "does not exist" in output
        assert "scrapestream topics create" in output
        assert "Traceback" not in output
    finally:
        dev.send_signal(signal.SIGINT)
        await asyncio.wait_for(dev.communicate(), 60)


async def test_a_worker_with_auth_on_and_no_principals_refuses_to_start(tmp_path):
    code, output = await run("worker", cwd=tmp_path)
    assert code == 2
    assert "SCRAPESTREAM_PRINCIPALS_FILE" in output
    assert "Traceback" not in output


async def test_principal_new_prints_its_secrets_once_and_stores_only_their_public_halves(tmp_path):
    code, output = await run(
        "principal", "new", "svc-a", "--role", "SERVICE", "--file", "p.json", cwd=tmp_path
    )
    assert code == 0, output
    token = next(line.split("=", 1)[1] for line in output.splitlines() if "SCRAPESTREAM_TOKEN=" in line)
    stored = (tmp_path / "p.json").read_text()
    assert token not in stored
    assert json.loads(stored)["principals"][0]["role"] == "SERVICE"


async def test_submit_without_a_broker_says_how_to_get_one(tmp_path):
    code, output = await run("submit", "https://example.com/", cwd=tmp_path)
    assert code == 2  # nothing named a broker: the README's exit code for a mistake in the settings
    assert "scrapestream dev" in output
    for command in (("watch",), ("tail", "completions"), ("list",), ("get", "0f")):
        code, output = await run(*command, cwd=tmp_path)
        assert code == 2, (command, output)
        assert "scrapestream dev" in output
        assert "Traceback" not in output


async def test_invalid_settings_are_reported_before_anything_starts(tmp_path):
    code, output = await run("worker", cwd=tmp_path, partitions="zero")
    assert code == 2
    assert "SCRAPESTREAM_PARTITIONS" in output
    contradicting = {"artifact_store": "s3", "min_insync_replicas": "5", "peer_secret_file": "/nowhere"}
    code, output = await run("worker", cwd=tmp_path, peer_secret="x" * 40, **contradicting)
    assert code == 2
    for said in ("SCRAPESTREAM_S3_BUCKET", "SCRAPESTREAM_REPLICATION_FACTOR", "PEER_SECRET_FILE, not both"):
        assert said in output, output  # every contradiction at once
    code, output = await run("worker", cwd=tmp_path, peer_secret="short")
    assert code == 2
    assert "cannot start:" in output
    assert "no principals are configured" in output  # and, in the same run,
    assert "SCRAPESTREAM_PEER_SECRET must be at least 32 bytes" in output
    assert "Traceback" not in output


async def test_an_unreachable_kafka_is_a_clear_error(tmp_path):
    from streams.broker.embedded import free_loopback_port

    for arguments in (["worker"], ["submit", "https://example.com/"]):
        bootstrap = f"127.0.0.1:{free_loopback_port()}"
        code, output = await run(*arguments, cwd=tmp_path, kafka_bootstrap=bootstrap, auth_enabled="false")
        assert code == 1, output
        assert "cannot reach Kafka at 127.0.0.1:" in output
        assert "Traceback" not in output


async def test_dev_stores_artifacts_in_s3_when_told_to_creating_its_bucket(origin, s3, tmp_path):
    from uuid import uuid4

    bucket = f"dev-{uuid4().hex[:12]}"
    settings = {name: str(value) for name, value in s3.settings(bucket).items() if name != "s3_create_bucket"}
    dev = await start("dev", "--allow-private", cwd=tmp_path, **settings)
    try:
        state = await wait_for_file(tmp_path / ".scrapestream" / "dev.json")
        assert state["artifacts"] == f"s3://{bucket}/artifacts/"
        code, output = await run("submit", origin.url("/page/dev-s3"), "--wait", "--json", cwd=tmp_path)
        assert code == 0, output
        (artifact,) = json.loads(output)["artifacts"]
        stored = s3.client().get_object(Bucket=bucket, Key=f"artifacts/{artifact['key']}")
        assert stored["Body"].read() == b"page /page/dev-s3"
    finally:
        if dev.returncode is None:
            dev.send_signal(signal.SIGINT)
        await asyncio.wait_for(dev.communicate(), 60)


async def test_a_worker_whose_broker_goes_away_says_so_once_in_a_while_and_in_readyz(tmp_path):
    from streams.broker.embedded import EmbeddedBroker, free_loopback_port

    port = free_loopback_port()
    broker = EmbeddedBroker()
    await broker.start()
    settings = {
        "kafka_bootstrap": broker.bootstrap,
        "broker_profile": "embedded",
        "auth_enabled": "false",
        "create_topics": "true",
    }
    worker = await start("worker", cwd=tmp_path, web_port=str(port), **settings)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get("/readyz")).status_code == 200:
                        break
                await asyncio.sleep(0.1)
            broker.stop()
            await asyncio.sleep(10)
            ready = await http.get("/readyz")
        assert ready.status_code == 503
        assert any("no broker" in reason for reason in ready.json()["reasons"])
    finally:
        broker.stop()
        worker.send_signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(worker.wait(), 60)
        if worker.returncode is None:
            worker.kill()
        printed, _ = await worker.communicate()
    lines = [line for line in printed.decode().splitlines() if " WARNING " in line or " ERROR " in line]
    assert len(lines) < 40, "\n".join(lines[-40:])  # ten seconds without a broker: not a line per retry


async def test_dev_without_a_browser_says_so_at_start_and_answers_a_render_at_once(tmp_path):
    from streams.broker.embedded import free_loopback_port

    port = free_loopback_port()
    settings = {"web_port": str(port), "browser_executable": "/bin/true", "processes": "2"}  # no browser
    dev = await start("dev", "--processes", "1", cwd=tmp_path, **settings)  # the flag over the setting
    try:
        state = await wait_for_file(tmp_path / ".scrapestream" / "dev.json")
        code, output = await run(
            "submit", "https://example.com/", "--type", "browser.render", "--wait", cwd=tmp_path
        )
        assert code == 1, output
        said = "rejected UNSUPPORTED_JOB_TYPE: no running worker can run 'browser.render': no browser:"
        assert said in output
        assert "/bin/true --version does not name Chromium" in output
        assert "apt install chromium" in output
        job_id = output.split()[1].rstrip(":")
        code, output = await run("submit", "https://example.com/", "--transport", "BROWSER", cwd=tmp_path)
        assert code == 1, output
        assert said in output
        code, output = await run("explain", job_id, cwd=tmp_path)
        assert code == 0, output
        assert "no browser" in output
        async with httpx.AsyncClient(base_url=str(state["web_url"])) as http:
            listed = {item["name"]: item for item in (await http.get("/job-types")).json()["items"]}
        assert listed["browser.render"]["runs_here"] is False
        assert "does not name Chromium" in listed["browser.render"]["not_run_here_because"]
        assert listed["http.fetch"]["runs_here"] is True
    finally:
        if dev.returncode is None:
            dev.send_signal(signal.SIGINT)
        printed, _ = await asyncio.wait_for(dev.communicate(), 60)
    shown = printed.decode()
    assert "job types        this worker runs job types: http.fetch" in shown
    assert "processes        1 worker process, 1 partition" in shown
    assert "browser          no browser: /bin/true --version does not name Chromium" in shown
    assert "(browser.render submissions are refused, UNSUPPORTED_JOB_TYPE)" in shown
    assert "tracing          off (OTEL_TRACES_EXPORTER=zipkin, otlp or console turns it on" in shown
    assert "it does not run browser.render: no browser: /bin/true --version does not name Chromium" in shown


async def test_watch_says_when_dev_goes_away_and_a_cluster_watcher_says_it_keeps_trying(origin, tmp_path):
    from streams.broker.embedded import free_loopback_port

    dev = await start("dev", "--allow-private", cwd=tmp_path, web_port=str(free_loopback_port()))
    watchers: list[asyncio.subprocess.Process] = []
    try:
        state = await wait_for_file(tmp_path / ".scrapestream" / "dev.json")
        watching = ("watch", "--from-beginning", "--json")  # this dev's one completion, whenever it joins
        on_dev = await start(*watching, cwd=tmp_path)
        bootstrap = str(state["kafka_bootstrap"])
        on_cluster = await start(
            *watching, cwd=tmp_path, kafka_bootstrap=bootstrap, broker_profile="embedded"
        )
        watchers += [on_dev, on_cluster]
        code, output = await run("submit", origin.url("/page/watched"), "--wait", cwd=tmp_path)
        assert code == 0, output
        for watcher in watchers:
            assert watcher.stdout is not None
            assert json.loads(await asyncio.wait_for(watcher.stdout.readline(), 60))["status"] == "SUCCEEDED"
        dev.send_signal(signal.SIGINT)
        await asyncio.wait_for(dev.communicate(), 60)
        printed, _ = await asyncio.wait_for(on_dev.communicate(), 60)  # it ends by itself
        assert on_dev.returncode == 1
        said = printed.decode()
        assert "scrapestream dev stopped (its broker is gone): nothing to watch" in said
        assert "Traceback" not in said
        assert "Unable connect" not in said  # not the Kafka driver's own words
        assert on_cluster.stdout is not None
        line = await asyncio.wait_for(on_cluster.stdout.readline(), 60)
        assert b"no broker answers; still trying (Ctrl-C stops)" in line
        assert on_cluster.returncode is None  # a cluster comes back: it goes on
    finally:
        for process in (dev, *watchers):
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
                await asyncio.wait_for(process.communicate(), 60)
