"""The `scrapestream` command: dev, worker, submit, watch, replay, and the API commands of `cli_api`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Coroutine, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console

from schemas.commands import SubmitJob
from schemas.enums import CacheMode, CaptureMode, JobStatus, PolicyClass, TransportPolicy
from schemas.errors import ScrapestreamError
from schemas.events import JobCompleted
from schemas.records import RenderOptions, Request
from streams.auth.peering import PeerSecretError
from streams.auth.principals import PrincipalsError
from streams.auth.signing import private_key_from_text
from streams.broker.compat import EMBEDDED_TANSU, KAFKA
from streams.cli_api import add_commands, run_api_command
from streams.client import Client, Signer
from streams.clock import utc_now
from streams.dev import read_dev_state, run_dev
from streams.jobtypes import deployment_policy, discover
from streams.replay import rebuild, verify
from streams.settings import Settings, SettingsError, load_settings
from streams.tables import completion_line
from streams.worker import Worker

EXIT_FAILED = 1
T = TypeVar("T")
GC_THRESHOLDS = (20_000, 20, 20)


class WorkerCrashedError(ScrapestreamError):
    """A worker task died: the process exits non-zero so its supervisor restarts it."""


EXIT_USAGE = 2
API_COMMANDS = frozenset({"get", "list", "events", "cancel", "redrive", "delete-history", "principal"})
ACCEPTANCE_TIMEOUT_S = 30.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scrapestream", description="Event-sourced scrape jobs on Kafka.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    commands = parser.add_subparsers(dest="command", required=True)
    dev = commands.add_parser("dev", help="embedded broker + worker + HTTP API, for local use")
    dev.add_argument("--allow-private", action="store_true", help="let jobs fetch loopback/private addresses")
    dev.add_argument(
        "--port", type=int, default=None, help="HTTP port (default: SCRAPESTREAM_WEB_PORT, else a free one)"
    )
    commands.add_parser("worker", help="join the cluster at SCRAPESTREAM_KAFKA_BOOTSTRAP and run every agent")
    submit = commands.add_parser("submit", help="publish a SubmitJob")
    submit.add_argument("url")
    # Unset flags leave the field to SubmitJob's own default.
    submit.add_argument("--type", dest="job_type")
    submit.add_argument("--transport", choices=list(TransportPolicy))
    submit.add_argument("--capture", choices=list(CaptureMode))
    submit.add_argument("--policy-class", choices=list(PolicyClass))
    submit.add_argument("--cache-mode", choices=list(CacheMode))
    submit.add_argument("--wait-until", help="rendering: load, domcontentloaded or networkidle")
    submit.add_argument("--wait-selector", help="rendering: a CSS selector the page must then have")
    submit.add_argument("--viewport", type=_viewport, help="rendering: WIDTHxHEIGHT, e.g. 1280x720")
    submit.add_argument("--full-page", action="store_true", help="rendering: screenshot the whole page")
    submit.add_argument("--caller", default="cli", help="caller identity (default: cli)")
    submit.add_argument("--callback-url")
    submit.add_argument("--idempotency-key")
    submit.add_argument("--deadline-s", type=float, default=3600.0, help="deadline from now, in seconds")
    submit.add_argument("--wait", action="store_true", help="print the JobCompleted record when it arrives")
    submit.add_argument("--timeout-s", type=float, default=300.0, help="how long --wait waits")
    submit.add_argument("--json", action="store_true", help="print JSON")
    watch = commands.add_parser("watch", help="print completions as they are published")
    watch.add_argument("--from-beginning", action="store_true", help="start at the oldest completion")
    watch.add_argument("--json", action="store_true", help="print one JSON record per line")
    add_commands(commands)
    replay = commands.add_parser("replay", help="rebuild the lifecycle store from the events topic")
    target = replay.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--verify", action="store_true", help="compare a rebuild with SCRAPESTREAM_DATA_DIR's store"
    )
    target.add_argument("--into", type=Path, help="rebuild into this (new) directory")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if arguments.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if arguments.command == "submit":
            return run(_submit(arguments))
        if arguments.command == "replay":
            return run(_replay(arguments))
        if arguments.command == "watch":
            return run(_watch(arguments))
        if arguments.command in API_COMMANDS:
            return run_api_command(arguments)
        overrides: dict[str, Any] = {}
        if arguments.command == "dev":
            overrides = {"auth_enabled": False, "s3_create_bucket": True}
            if arguments.port is not None:
                overrides["web_port"] = arguments.port
            elif "SCRAPESTREAM_WEB_PORT" not in os.environ:
                overrides["web_port"] = 0
            if arguments.allow_private:
                overrides["allow_private_networks"] = True
        settings = load_settings(**overrides)
        run(_serve(arguments.command, settings))
    except ScrapestreamError as exc:
        sys.stderr.write(f"scrapestream: {exc}\n")
        return (
            EXIT_USAGE if isinstance(exc, SettingsError | PrincipalsError | PeerSecretError) else EXIT_FAILED
        )
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
    crashed = asyncio.ensure_future(worker.crashed())
    either: set[asyncio.Future[Any]] = {stopped, crashed}
    try:
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    finally:
        crashed.cancel()
        await worker.stop()
    if crashed.done() and not crashed.cancelled():
        raise WorkerCrashedError(f"the worker stopped making progress: {crashed.result()!r}")


def run(main: Coroutine[Any, Any, T]) -> T:
    """Runs on uvloop where it is installed: the event loop's own costs are a large part of a job's.

    The cyclic garbage collector runs far less often than by default: with its default thresholds
    it took a fifth of a worker's CPU, mostly rescanning long-lived caches (docs/PERFORMANCE.md).
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def _connected_settings() -> Settings:
    """Settings whose bootstrap and broker profile come from the environment, else from a running `dev`."""
    settings = load_settings()
    if "SCRAPESTREAM_KAFKA_BOOTSTRAP" in os.environ:
        return settings
    state = read_dev_state()
    if state is None:
        raise ScrapestreamError("no SCRAPESTREAM_KAFKA_BOOTSTRAP and no `scrapestream dev` running here")
    return settings.model_copy(
        update={"kafka_bootstrap": str(state["kafka_bootstrap"]), "broker_profile": "embedded"}
    )


def _connection() -> tuple[str, Any]:
    settings = _connected_settings()
    return settings.kafka_bootstrap, EMBEDDED_TANSU if settings.broker_profile == "embedded" else KAFKA


async def _replay(arguments: argparse.Namespace) -> int:
    settings = _connected_settings()
    profile = EMBEDDED_TANSU if settings.broker_profile == "embedded" else KAFKA
    policy = deployment_policy(settings, discover())
    if arguments.into is not None:
        if arguments.into.exists() and any(arguments.into.iterdir()):
            raise ScrapestreamError(f"{arguments.into} is not empty")
        folded = await rebuild(settings, profile, policy, arguments.into)
        _print(f"rebuilt {sum(folded.values())} events into {arguments.into}", False)
        return 0
    with tempfile.TemporaryDirectory(prefix="scrapestream-replay-") as scratch:
        difference = await verify(settings, profile, policy, Path(scratch) / "lifecycle")
    if difference is not None:
        _print(f"replay differs from {settings.data_dir / 'lifecycle'}: {difference.describe()}", False)
        return EXIT_FAILED
    _print(f"replay of the events topic matches {settings.data_dir / 'lifecycle'}", False)
    return 0


def submission_of(arguments: argparse.Namespace) -> SubmitJob:
    """The `submit` command's job; render options only when a rendering flag is given."""
    width, height = arguments.viewport or (None, None)
    given = {
        "wait_until": arguments.wait_until,
        "wait_selector": arguments.wait_selector,
        "viewport_width": width,
        "viewport_height": height,
        "full_page": arguments.full_page or None,
    }
    rendering = _given(given)
    chosen = {
        "job_type": arguments.job_type,
        "transport_policy": arguments.transport,
        "capture_mode": arguments.capture,
        "policy_class": arguments.policy_class,
        "cache_mode": arguments.cache_mode,
        "render": RenderOptions(**rendering) if rendering else None,
    }
    return SubmitJob(
        caller_identity=arguments.caller,
        idempotency_key=arguments.idempotency_key,
        request=Request(url=arguments.url),
        deadline_at=utc_now() + timedelta(seconds=arguments.deadline_s),
        callback_url=arguments.callback_url,
        **_given(chosen),
    )


def _given(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


def _viewport(text: str) -> tuple[int, int]:
    width, separator, height = text.lower().partition("x")
    if not separator or not width.isdigit() or not height.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT")
    return int(width), int(height)


async def _submit(arguments: argparse.Namespace) -> int:
    bootstrap, profile = _connection()
    command = submission_of(arguments)
    progress = Console(stderr=True)
    async with Client(bootstrap, profile, signer=_signer()) as client:
        job_id = await client.submit(command)
        with progress.status(f"waiting for a worker to take job {job_id}"):
            try:
                submission = await asyncio.wait_for(client.submission(job_id), ACCEPTANCE_TIMEOUT_S)
            except TimeoutError:
                submission = None
        said = "submitted, not yet taken by a worker" if submission is None else submission.value
        if not arguments.wait or submission is None:
            answer = {"job_id": str(job_id), "submission": said}
            _print(answer if arguments.json else f"job {job_id}: {said}", arguments.json)
            return 0
        if not arguments.json:
            _print(f"job {job_id}: {said}", False)
        try:
            with progress.status(f"waiting for job {job_id} to complete"):
                completion = await asyncio.wait_for(client.wait_for(job_id), arguments.timeout_s)
        except TimeoutError:
            sys.stderr.write(f"scrapestream: job {job_id} did not complete within {arguments.timeout_s} s\n")
            return EXIT_FAILED
    if arguments.json:
        _print(json.loads(completion.model_dump_json()) | {"submission": said}, True)
    else:
        _print(_outcome_line(completion), False)
    return 0 if completion.status.value == "SUCCEEDED" else EXIT_FAILED


async def _watch(arguments: argparse.Namespace) -> int:
    bootstrap, profile = _connection()
    console = Console()
    async with (
        Client(bootstrap, profile) as client,
        contextlib.aclosing(client.completions(from_beginning=arguments.from_beginning)) as completions,
    ):
        async for completion in completions:
            document = json.loads(completion.model_dump_json())
            if arguments.json:
                sys.stdout.write(json.dumps(document) + "\n")
                sys.stdout.flush()
            else:
                console.print(completion_line(document))
    return 0


def _signer() -> Signer | None:
    """Who signs commands: SCRAPESTREAM_PRINCIPAL, with SCRAPESTREAM_SIGNING_KEY or its _FILE."""
    name = os.environ.get("SCRAPESTREAM_PRINCIPAL")
    text = os.environ.get("SCRAPESTREAM_SIGNING_KEY")
    path = os.environ.get("SCRAPESTREAM_SIGNING_KEY_FILE")
    if path and text is None:
        try:
            text = Path(path).read_text().strip()
        except OSError as exc:
            raise ScrapestreamError(f"cannot read SCRAPESTREAM_SIGNING_KEY_FILE {path}: {exc}") from exc
    if not name and not text:
        return None
    if not name or not text:
        raise ScrapestreamError(
            "signing needs both SCRAPESTREAM_PRINCIPAL and SCRAPESTREAM_SIGNING_KEY(_FILE)"
        )
    try:
        return Signer(name, private_key_from_text(text))
    except ValueError as exc:
        raise ScrapestreamError(f"SCRAPESTREAM_SIGNING_KEY: {exc}") from exc


def _outcome_line(completion: JobCompleted) -> str:
    failure = completion.failure
    if completion.status is JobStatus.REJECTED and failure is not None:
        return f"job {completion.job_id} REJECTED {failure.code}: {failure.safe_message}"
    detail = "" if failure is None else f" {failure.code}: {failure.safe_message}"
    attempts = f"after {completion.attempt_count} attempt(s)"
    return f"job {completion.job_id} {completion.status.value} {attempts}{detail}"


def _print(value: Any, as_json: bool) -> None:
    sys.stdout.write((json.dumps(value, indent=2) if as_json else str(value)) + "\n")


if __name__ == "__main__":
    sys.exit(main())
