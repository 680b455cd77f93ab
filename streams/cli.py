"""The `scrapestream` command: dev, worker, submit."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from schemas.commands import SubmitJob
from schemas.errors import ScrapestreamError
from schemas.events import JobRejected
from schemas.records import Request
from streams.broker.compat import EMBEDDED_TANSU, KAFKA
from streams.client import Client
from streams.clock import utc_now
from streams.dev import read_dev_state, run_dev
from streams.settings import Settings, SettingsError, load_settings
from streams.worker import Worker

EXIT_FAILED = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scrapestream", description="Event-sourced scrape jobs on Kafka.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    commands = parser.add_subparsers(dest="command", required=True)
    dev = commands.add_parser("dev", help="embedded broker + worker + HTTP API, for local use")
    dev.add_argument("--allow-private", action="store_true", help="let jobs fetch loopback/private addresses")
    dev.add_argument("--port", type=int, default=None, help="HTTP port (default: a free one)")
    commands.add_parser("worker", help="join the cluster at SCRAPESTREAM_KAFKA_BOOTSTRAP and run every agent")
    submit = commands.add_parser("submit", help="publish a SubmitJob")
    submit.add_argument("url")
    submit.add_argument("--type", default="http.fetch", dest="job_type")
    submit.add_argument("--caller", default="cli", help="caller identity (default: cli)")
    submit.add_argument("--callback-url")
    submit.add_argument("--idempotency-key")
    submit.add_argument("--deadline-s", type=float, default=3600.0, help="deadline from now, in seconds")
    submit.add_argument("--wait", action="store_true", help="print the JobCompleted record when it arrives")
    submit.add_argument("--timeout-s", type=float, default=300.0, help="how long --wait waits")
    submit.add_argument("--json", action="store_true", help="print JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if arguments.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if arguments.command == "submit":
            return asyncio.run(_submit(arguments))
        overrides: dict[str, Any] = {}
        if arguments.command == "dev":
            overrides = {"web_port": 0 if arguments.port is None else arguments.port}
            if arguments.allow_private:
                overrides["allow_private_networks"] = True
        settings = load_settings(**overrides)
        asyncio.run(_serve(arguments.command, settings))
    except ScrapestreamError as exc:
        sys.stderr.write(f"scrapestream: {exc}\n")
        return EXIT_USAGE if isinstance(exc, SettingsError) else EXIT_FAILED
    return 0


async def _serve(command: str, settings: Settings) -> None:
    stopped: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def stop() -> None:
        if not stopped.done():
            stopped.set_result(None)

    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop)
    if command == "dev":
        await run_dev(settings, stopped)
        sys.stdout.write("scrapestream dev: stopped; its broker and data are gone\n")
        return
    worker = Worker(settings)
    await worker.start()
    sys.stdout.write(f"scrapestream worker: serving HTTP on {settings.web_host}:{worker.web_port}\n")
    sys.stdout.flush()
    try:
        await stopped
    finally:
        await worker.stop()


def _connection() -> tuple[str, Any]:
    """The bootstrap and broker profile: from the environment, else from a running `dev`."""
    settings = load_settings()
    if "SCRAPESTREAM_KAFKA_BOOTSTRAP" in os.environ:
        return settings.kafka_bootstrap, EMBEDDED_TANSU if settings.broker_profile == "embedded" else KAFKA
    state = read_dev_state()
    if state is None:
        raise ScrapestreamError("no SCRAPESTREAM_KAFKA_BOOTSTRAP and no `scrapestream dev` running here")
    return str(state["kafka_bootstrap"]), EMBEDDED_TANSU


async def _submit(arguments: argparse.Namespace) -> int:
    bootstrap, profile = _connection()
    command = SubmitJob(
        caller_identity=arguments.caller,
        idempotency_key=arguments.idempotency_key,
        request=Request(url=arguments.url),
        job_type=arguments.job_type,
        deadline_at=utc_now() + timedelta(seconds=arguments.deadline_s),
        callback_url=arguments.callback_url,
    )
    async with Client(bootstrap, profile) as client:
        job_id = await client.submit(command)
        if not arguments.wait:
            _print({"job_id": str(job_id)} if arguments.json else f"submitted job {job_id}", arguments.json)
            return 0
        try:
            completion = await asyncio.wait_for(client.wait_for(job_id), arguments.timeout_s)
        except TimeoutError:
            sys.stderr.write(f"scrapestream: job {job_id} did not complete within {arguments.timeout_s} s\n")
            return EXIT_FAILED
    if isinstance(completion, JobRejected):
        rejection = f"job {job_id} REJECTED {completion.reason.value}: {completion.detail}"
        _print(json.loads(completion.model_dump_json()) if arguments.json else rejection, arguments.json)
        return EXIT_FAILED
    if arguments.json:
        _print(json.loads(completion.model_dump_json()), True)
    else:
        failure = (
            ""
            if completion.failure is None
            else f" {completion.failure.code}: {completion.failure.safe_message}"
        )
        _print(
            f"job {job_id} {completion.status.value} after {completion.attempt_count} attempt(s){failure}",
            False,
        )
    return 0 if completion.status.value == "SUCCEEDED" else EXIT_FAILED


def _print(value: Any, as_json: bool) -> None:
    sys.stdout.write((json.dumps(value, indent=2) if as_json else str(value)) + "\n")


if __name__ == "__main__":
    sys.exit(main())
