"""`scrapestream dev`: the embedded broker, a worker (one process a core) with every agent, the HTTP API,
local artifacts.

The broker keeps its log in memory, so every run starts from a clean data directory and removes it
when it stops; other commands run in the same directory find the run through `STATE_FILE`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from streams.broker.embedded import EmbeddedBroker
from streams.devstate import DEV_DIR, STATE_FILE, read_dev_state
from streams.fetch.browser import browser_problem, executable_of
from streams.readers.fleet import startup_lines
from streams.runtime import tracing
from streams.settings import Settings, on_embedded_broker
from streams.supervisor.run import Supervised, process_environment
from streams.worker import Worker

DEV_SETTINGS = (  # what `dev` gives its worker, passed on to each of its processes
    "kafka_bootstrap",
    "broker_profile",
    "kafka_security_protocol",
    "auth_enabled",
    "s3_create_bucket",
    "create_topics",
    "allow_private_networks",
    "partitions",
    "web_host",
)


async def run_dev(settings: Settings, stopped: Any, count: int = 1, verbose: bool = False) -> None:
    """Serve until `stopped` (an awaitable) completes; always removes the state file and broker."""
    if read_dev_state() is not None:
        raise SystemExit("scrapestream dev already runs from this directory (.scrapestream/dev.json)")
    data_dir = _fresh_data_dir()
    async with EmbeddedBroker(log_path=DEV_DIR / "broker.log") as broker:
        worker_settings = on_embedded_broker(settings, broker.bootstrap, data_dir=data_dir)
        if count == 1:
            await _one_process(worker_settings, stopped, broker.pid)
        else:
            await _processes(worker_settings, stopped, count, verbose, broker.pid)
    shutil.rmtree(data_dir, ignore_errors=True)  # the broker's log is gone: what folded it goes too
    kept = "" if settings.artifact_store == "local" else f" (its artifacts stay in s3://{settings.s3_bucket})"
    log = DEV_DIR / "broker.log"
    sys.stdout.write(f"scrapestream dev: stopped; its broker and data are gone{kept}; its log stays: {log}\n")


async def _one_process(settings: Settings, stopped: Any, broker_pid: int | None) -> None:
    worker = Worker(settings, alone=True)
    await worker.start()
    try:
        state = _state(settings, worker.web_port, 1, broker_pid)
        STATE_FILE.write_text(json.dumps(state, indent=2) + "\n")
        _announce(state, startup_lines(worker.fleet.own) if worker.fleet else [])
        await stopped
    finally:
        STATE_FILE.unlink(missing_ok=True)
        await worker.stop()


async def _processes(
    settings: Settings, stopped: Any, count: int, verbose: bool, broker_pid: int | None
) -> None:
    """The worker as `count` processes on the embedded broker, behind one port."""
    inherited = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("SCRAPESTREAM_KAFKA_SASL_", "SCRAPESTREAM_KAFKA_SSL_"))
    }
    shared = {name: getattr(settings, name) for name in DEV_SETTINGS}
    supervised = Supervised(
        settings,
        count,
        lambda index: process_environment(inherited, settings, index, shared),
        verbose,
        alone=True,
    )

    def started(running: Supervised) -> None:
        state = _state(settings, running.server.port, count, broker_pid)
        STATE_FILE.write_text(json.dumps(state, indent=2) + "\n")
        _announce(state, running.lines)

    try:
        await supervised.run(stopped, started)
    finally:
        STATE_FILE.unlink(missing_ok=True)


def _state(settings: Settings, port: int | None, count: int, broker_pid: int | None) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "broker_pid": broker_pid,
        "kafka_bootstrap": settings.kafka_bootstrap,
        "topic_prefix": settings.topic_prefix,
        "partitions": settings.partitions,
        "processes": count,
        "web_url": f"http://{settings.web_host}:{port}",
        "callbacks": "signed with SCRAPESTREAM_CALLBACK_SECRET"
        if settings.callback_secret is not None
        else "unsigned (no SCRAPESTREAM_CALLBACK_SECRET); each still carries webhook-id and "
        "webhook-timestamp",
        "artifacts": str(settings.local_artifacts.resolve())
        if settings.artifact_store == "local"
        else f"s3://{settings.s3_bucket}/{settings.s3_prefix}",
        "browser": _browser(settings),
        "tracing": tracing.described(os.environ),
    }


def _browser(settings: Settings) -> str:
    if settings.browser_cdp_url is not None:
        return f"Chromium over CDP at {settings.browser_cdp_url}: browser.render jobs run"
    problem = browser_problem(settings)
    if problem is not None:
        return f"{problem} (browser.render submissions are refused, UNSUPPORTED_JOB_TYPE)"
    return f"{executable_of(settings.browser_executable)}: browser.render jobs run"


def _fresh_data_dir() -> Path:
    data_dir = DEV_DIR / "data"
    shutil.rmtree(data_dir, ignore_errors=True)
    DEV_DIR.mkdir(exist_ok=True)
    return data_dir


def _announce(state: dict[str, Any], job_types: list[str]) -> None:
    lines = [
        "scrapestream dev: started from a clean state (the embedded broker keeps its log in memory)",
        f"  kafka bootstrap  {state['kafka_bootstrap']}",
        f"  http api         {state['web_url']}   (docs: {state['web_url']}/docs)",
        f"  console          {state['web_url']}/ui",
        "  auth             off: every HTTP request and every command is trusted as ADMIN (dev only)",
        f"  processes        {state['processes']} worker process{'es' if state['processes'] > 1 else ''}, "
        f"{state['partitions']} partition{'s' if state['partitions'] > 1 else ''} (SCRAPESTREAM_PROCESSES)",
        f"  artifacts        {state['artifacts']}",
        f"  callbacks        {state['callbacks']}",
        f"  browser          {state['browser']}",
        f"  tracing          {state['tracing']}",
        *(f"  job types        {line}" for line in job_types),
        "  try: scrapestream submit https://example.com/ --wait      Ctrl-C stops everything",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
