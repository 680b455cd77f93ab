"""The CLI commands that speak Kafka: `submit` (and `--wait`), `watch`, `tail`, `topics`, `replay`.

They find the broker through `SCRAPESTREAM_KAFKA_BOOTSTRAP`, else a `scrapestream dev` running in
this directory, and use the topics of `SCRAPESTREAM_TOPIC_PREFIX` (or the running dev's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import msgspec

from schemas.commands import SubmitJob
from schemas.enums import AnswerKind, JobStatus
from schemas.events import Event, JobCompleted
from schemas.records import Request
from schemas.work import SubmissionAnswer
from streams.cli.exits import EXIT_FAILED, EXIT_TIMED_OUT, EXIT_USAGE
from streams.cli.render_flags import given_fields, render_options_of
from streams.cli.tables import progress_of
from streams.client import Client, Signer
from streams.clock import utc_now
from streams.devstate import read_dev_state
from streams.errors import UsageError
from streams.runtime.schema_registry import SchemaRegistry
from streams.settings import Settings, load_settings, on_embedded_broker

T = TypeVar("T")
ACCEPTANCE_TIMEOUT_S = 30.0
# A submission answered REPEATED was decided before (a resend, or read again after a crash): its job exists.
JOB_MADE = (AnswerKind.CREATED, AnswerKind.REUSED, AnswerKind.REPEATED)
UNSIGNED = (
    "refused: the worker has auth on and takes signed commands only; set SCRAPESTREAM_PRINCIPAL and "
    "SCRAPESTREAM_SIGNING_KEY (or SCRAPESTREAM_SIGNING_KEY_FILE) to a principal's name and the key "
    "`scrapestream principal new` printed for it (docs/SECURITY.md)"
)


def run_kafka_command(arguments: argparse.Namespace) -> int:
    if arguments.command == "submit":
        return run(_submit(arguments))
    if arguments.command == "watch":
        return run(_watch(arguments))
    if arguments.command == "topics":
        return run(_topics(arguments))
    if arguments.command == "tail":
        from streams.cli.tail import tail

        return run(tail(connected_settings(), arguments))
    if arguments.command == "acls":
        from streams.cli.acls import run_acls

        return run(run_acls(connected_settings() if arguments.apply else load_settings(), arguments))
    return run(_replay(arguments))


def run(main: Coroutine[Any, Any, T]) -> T:
    """Runs on uvloop where it is installed; Ctrl-C reaches the caller as KeyboardInterrupt."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def connected_settings() -> Settings:
    """Settings from the environment; the bootstrap, profile, topics and partitions of a running
    `dev` when the environment names no Kafka."""
    settings = load_settings()
    if "SCRAPESTREAM_KAFKA_BOOTSTRAP" in os.environ:
        return settings
    state = read_dev_state()
    if state is None:
        raise UsageError(
            "no Kafka to talk to: start `scrapestream dev` in this directory (another terminal), "
            "or set SCRAPESTREAM_KAFKA_BOOTSTRAP"
        )
    update: dict[str, Any] = {}
    if "SCRAPESTREAM_TOPIC_PREFIX" not in os.environ and "topic_prefix" in state:
        update["topic_prefix"] = str(state["topic_prefix"])
    if "SCRAPESTREAM_PARTITIONS" not in os.environ and "partitions" in state:
        update["partitions"] = int(state["partitions"])
    return on_embedded_broker(settings, str(state["kafka_bootstrap"]), **update)


def client_of(settings: Settings, signer: Signer | None = None) -> Client:
    registry = SchemaRegistry.of(settings)
    return Client(settings.kafka_access, settings.client_profile, settings.topic_prefix, signer, registry)


def submission_of(arguments: argparse.Namespace) -> SubmitJob:
    """The `submit` command's job."""
    chosen = {
        "job_type": arguments.job_type,
        "transport_policy": arguments.transport,
        "capture_mode": arguments.capture,
        "policy_class": arguments.policy_class,
        "cache_mode": arguments.cache_mode,
        "retention_class": arguments.retention,
        "render": render_options_of(arguments),
    }
    return SubmitJob(
        caller_identity=arguments.caller or "cli",
        idempotency_key=arguments.idempotency_key,
        request=Request(url=arguments.url),
        deadline_at=utc_now() + timedelta(seconds=arguments.deadline_s),
        callback_url=arguments.callback_url,
        **given_fields(chosen),
    )


async def _submit(arguments: argparse.Namespace) -> int:
    from rich.console import Console

    settings = connected_settings()
    signer = signer_of(settings)
    if arguments.caller is None:  # a signed command submits as its principal unless told otherwise
        arguments.caller = "cli" if signer is None else signer.principal
    if arguments.source is not None:
        from streams.cli.bulk import submit_file

        async with client_of(settings, signer) as client:
            return await submit_file(arguments, client)
    command = submission_of(arguments)
    console = Console(stderr=True)
    async with client_of(settings, signer) as client:
        with console.status("waiting for a worker to answer the submission"):
            job_id, answer = await client.submit_answered(command, ACCEPTANCE_TIMEOUT_S)
        if answer is None or answer.answer not in JOB_MADE:
            return _refused(arguments, job_id, answer)
        job_id = answer.job_id or job_id
        said = answer.answer.value.lower()
        if not arguments.wait:
            _say(arguments, job_id, said)
            return 0
        if not arguments.json:
            _say(arguments, job_id, said)
        try:
            async with asyncio.timeout(arguments.timeout_s):
                completion = await _until_done(client, job_id, console, arguments.json)
        except TimeoutError:
            console.print(f"job {job_id} did not complete within {arguments.timeout_s:g} s (exit 3)")
            return EXIT_TIMED_OUT
    if arguments.json:
        _print(msgspec.to_builtins(completion) | {"submission": said}, True)
    else:
        _print(_outcome_line(completion), False)
    return 0 if completion.status is JobStatus.SUCCEEDED else EXIT_FAILED


def _refused(arguments: argparse.Namespace, job_id: UUID, answer: SubmissionAnswer | None) -> int:
    """Says why a submission made no job (nobody answered, rejected, not a usable command); its exit code."""
    if answer is None:
        waited = f"{ACCEPTANCE_TIMEOUT_S:g} s"
        _say(arguments, job_id, f"submitted, but no worker answered within {waited}: is a worker running?")
        return EXIT_TIMED_OUT
    if answer.answer is AnswerKind.REJECTED:
        reason = "UNKNOWN" if answer.rejection is None else answer.rejection.value
        _say(arguments, answer.job_id or job_id, f"rejected {reason}: {answer.reason}", reason)
        return EXIT_FAILED
    if "unsigned" in (answer.reason or ""):
        _say(arguments, job_id, UNSIGNED, "UNSIGNED")
        return EXIT_USAGE
    _say(arguments, job_id, f"refused as dead input: {answer.reason}", "DEAD_INPUT")
    return EXIT_FAILED


async def _until_done(client: Client, job_id: UUID, console: Any, quiet: bool) -> JobCompleted:
    """The job's completion; meanwhile each change of where it is, on standard error."""

    async def show(events: AsyncIterator[Event]) -> None:
        async for event in events:
            line = progress_of(event)
            if line is not None and not quiet:
                console.print(f"  {line}", highlight=False)

    following = client.follow(job_id)
    showing = asyncio.ensure_future(show(following))
    try:
        return await client.wait_for(job_id)
    finally:
        showing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await showing
        await following.aclose()


def _say(arguments: argparse.Namespace, job_id: UUID, said: str, reason: str | None = None) -> None:
    if arguments.json:
        answer = {"job_id": str(job_id), "submission": said.split(" ", 1)[0]}
        _print(answer | ({"reason": reason} if reason else {}), True)
    else:
        _print(f"job {job_id}: {said}", False)


async def _watch(arguments: argparse.Namespace) -> int:
    from streams.cli.watch import watch

    return await watch(arguments, connected_settings(), client_of)


async def _topics(arguments: argparse.Namespace) -> int:
    """`create` makes what is missing, then checks; `check` names each fault (exit 1 for any);
    `describe` shows each topic as the cluster has it."""
    from streams.jobtypes import discover, runnable_here
    from streams.runtime.topics import create_missing, inspect, problems, topic_specs, worker_missing_acls

    settings = connected_settings()
    runners = {*settings.profiles, *runnable_here(settings, discover()), *arguments.job_types}
    specs = topic_specs(settings, runners)
    if arguments.action == "create":
        for name in await create_missing(settings, specs):
            _print(f"created {name}", False)
    found = await inspect(settings, [spec.name for spec in specs])
    if arguments.action == "describe":
        for spec in specs:
            have = found.get(spec.name)
            if have is None:
                _print(f"{spec.name}: missing", False)
                continue
            shown = ", ".join(f"{key}={have.configs.get(key, 'unset')}" for key in spec.configs)
            _print(
                f"{spec.name}: {have.partitions} partitions, replication {have.replication}, {shown}", False
            )
        return 0
    faults = [
        f"missing ACL: {acl.line()}" for acl in await worker_missing_acls(settings, [s.name for s in specs])
    ]
    faults += problems(specs, found)
    for fault in faults:
        _print(fault, False)
    if not faults:
        _print(f"all {len(specs)} topics are as the settings say", False)
    return EXIT_FAILED if faults else 0


async def _replay(arguments: argparse.Namespace) -> int:
    from streams.jobtypes import deployment_policy, discover
    from streams.readers.replay import check_log, rebuild, verify

    settings = connected_settings()
    profile = settings.client_profile
    policy = deployment_policy(settings, discover())
    if arguments.into is not None:
        into = Path(arguments.into)
        if _holds_anything(into):
            raise UsageError(f"{into} is not empty")
        folded = await rebuild(settings, profile, policy, into)
        _print(f"rebuilt {sum(folded.values())} events into {into}", False)
        return 0
    with tempfile.TemporaryDirectory(prefix="scrapestream-replay-") as scratch:
        difference = await verify(settings, profile, policy, Path(scratch) / "lifecycle")
    found = await check_log(settings, profile)
    faults = found.problems(duplicates_allowed=not settings.exactly_once)
    if difference is not None:
        faults.insert(0, f"replay differs from {settings.data_dir / 'lifecycle'}: {difference.describe()}")
    for fault in faults:
        _print(fault, False)
    if faults:
        return EXIT_FAILED
    _print(f"replay of the events topic matches {settings.data_dir / 'lifecycle'}", False)
    _print(f"{found.jobs} jobs, none with more than one terminal event", False)
    if settings.exactly_once:
        _print("no job with more than one completion (read committed)", False)
    else:
        _print(
            f"{len(found.completions_over_one)} jobs with repeated completions, as at_least_once allows",
            False,
        )
    return 0


def _holds_anything(directory: Path) -> bool:
    return directory.exists() and any(directory.iterdir())


def signer_of(settings: Settings) -> Signer | None:
    """Who signs commands: SCRAPESTREAM_PRINCIPAL, with SCRAPESTREAM_SIGNING_KEY or its _FILE."""
    name = os.environ.get("SCRAPESTREAM_PRINCIPAL")
    text = os.environ.get("SCRAPESTREAM_SIGNING_KEY")
    path = os.environ.get("SCRAPESTREAM_SIGNING_KEY_FILE")
    if path and text is None:
        try:
            text = Path(path).read_text().strip()
        except OSError as exc:
            raise UsageError(f"cannot read SCRAPESTREAM_SIGNING_KEY_FILE {path}: {exc}") from exc
    if not name and not text:
        return None
    if not name or not text:
        raise UsageError("signing needs both SCRAPESTREAM_PRINCIPAL and SCRAPESTREAM_SIGNING_KEY(_FILE)")
    signer = Signer(name, text, deployment=settings.deployment_id)
    try:
        signer.private_key  # noqa: B018 - checks the key now, with the variable's name in the message
    except ValueError as exc:
        raise UsageError(f"SCRAPESTREAM_SIGNING_KEY: {exc}") from exc
    return signer


def _outcome_line(completion: JobCompleted) -> str:
    failure = completion.failure
    if completion.status is JobStatus.REJECTED and failure is not None:
        return f"job {completion.job_id} REJECTED {failure.code}: {failure.safe_message}"
    detail = "" if failure is None else f" {failure.code}: {failure.safe_message}"
    attempts = f"after {completion.attempt_count} attempt(s)"
    cached = " (answered from the cache)" if completion.from_cache else ""
    return f"job {completion.job_id} {completion.status.value} {attempts}{cached}{detail}"


def _print(value: Any, as_json: bool) -> None:
    sys.stdout.write((json.dumps(value, indent=2) if as_json else str(value)) + "\n")
