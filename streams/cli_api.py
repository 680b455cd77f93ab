"""CLI commands for people and scripts: read and change jobs through a worker's HTTP API."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console

from schemas.enums import ActorRole, JobStatus
from streams.api_client import ApiClient, api_url
from streams.auth.issue import add_to_file, issue
from streams.clock import utc_now
from streams.tables import events_table, job_table, jobs_table, print_all


def add_commands(commands: Any) -> None:
    """The subcommands of `scrapestream` that use the HTTP API (`--url`, `--token`, `--json`)."""
    get = _api_command(commands, "get", "show a job: state, attempts, artifacts")
    get.add_argument("job_id")
    listing = _api_command(commands, "list", "list jobs, newest first")
    listing.add_argument("--state", action="append", choices=[s.value for s in JobStatus], help="repeatable")
    listing.add_argument("--caller")
    listing.add_argument("--type", dest="job_type")
    listing.add_argument("--limit", type=int, default=20)
    listing.add_argument("--cursor", help="`next_cursor` of the previous page")
    listing.add_argument("--dead-letters", action="store_true", help="only dead-lettered jobs")
    events = _api_command(commands, "events", "show a job's history")
    events.add_argument("job_id")
    for name, summary in (
        ("cancel", "cancel a job"),
        ("redrive", "run a dead-lettered job again (admin)"),
        ("delete-history", "delete a finished job's history (admin)"),
    ):
        mutation = _api_command(commands, name, summary)
        mutation.add_argument("job_id")
        mutation.add_argument("--reason", required=True)
        if name == "redrive":
            mutation.add_argument("--deadline-s", type=float, help="a new deadline, in seconds from now")
    principal = commands.add_parser("principal", help="manage principals")
    new = principal.add_subparsers(dest="action", required=True).add_parser(
        "new", help="create a principal: prints its token and signing key once"
    )
    new.add_argument("name")
    new.add_argument("--role", required=True, choices=[role.value for role in ActorRole])
    new.add_argument("--file", help="add the principal to this principals file (created if missing)")
    new.add_argument("--json", action="store_true", help="print JSON")


def _api_command(commands: Any, name: str, summary: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(name, help=summary)
    parser.add_argument("--url", help="API base URL (default: SCRAPESTREAM_URL, else a running dev)")
    parser.add_argument("--token", help="bearer token (default: SCRAPESTREAM_TOKEN)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


def run_api_command(arguments: argparse.Namespace) -> int:
    if arguments.command == "principal":
        return _new_principal(arguments)
    console = Console()
    token = arguments.token or os.environ.get("SCRAPESTREAM_TOKEN")
    with ApiClient(api_url(arguments.url), token) as api:
        answer = _call(api, arguments)
    if arguments.json:
        sys.stdout.write(json.dumps(answer, indent=2) + "\n")
    else:
        _show(console, arguments, answer)
    return 0


def _call(api: ApiClient, arguments: argparse.Namespace) -> Any:
    command = arguments.command
    if command == "get":
        return api.get(f"/jobs/{arguments.job_id}")
    if command == "events":
        return api.get(f"/jobs/{arguments.job_id}/events")
    if command == "list":
        path = "/dead-letters" if arguments.dead_letters else "/jobs"
        params = {"caller": arguments.caller, "limit": arguments.limit, "cursor": arguments.cursor}
        if not arguments.dead_letters:
            params |= {"state": arguments.state, "type": arguments.job_type}
        return api.get(path, params)
    body: dict[str, Any] = {"reason": arguments.reason}
    if command == "redrive" and arguments.deadline_s is not None:
        body["deadline_at"] = (utc_now() + timedelta(seconds=arguments.deadline_s)).isoformat()
    return api.post(f"/jobs/{arguments.job_id}/{command}", body)


def _show(console: Console, arguments: argparse.Namespace, answer: Any) -> None:
    command = arguments.command
    if command == "get":
        print_all(console, *job_table(answer))
    elif command == "events":
        print_all(console, events_table(answer["items"]))
    elif command == "list":
        print_all(console, jobs_table(answer["items"]))
        if answer.get("next_cursor"):
            console.print(f"more: --cursor {answer['next_cursor']}")
    elif answer["outcome"] == "PENDING":
        pending = f"not decided yet (command {answer['command_id']})"
        console.print(f"{command} of {arguments.job_id} submitted; {pending}")
    else:
        console.print(f"{command} of {arguments.job_id}: done ({answer['audit']['detail']})")


def _new_principal(arguments: argparse.Namespace) -> int:
    issued = issue(arguments.name, ActorRole(arguments.role))
    if arguments.file:
        add_to_file(Path(arguments.file), issued.entry)
    secrets = {"token": issued.token, "signing_key": issued.signing_key, "entry": issued.entry}
    if arguments.json:
        sys.stdout.write(json.dumps(secrets, indent=2) + "\n")
        return 0
    lines = [
        f"principal {arguments.name} ({arguments.role}); these secrets are shown once:",
        f"  SCRAPESTREAM_TOKEN={issued.token}",
        f"  SCRAPESTREAM_PRINCIPAL={arguments.name}",
        f"  SCRAPESTREAM_SIGNING_KEY={issued.signing_key}",
        f"added to {arguments.file}" if arguments.file else "principals file entry:",
    ]
    if not arguments.file:
        lines.append(json.dumps(issued.entry, indent=2))
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
