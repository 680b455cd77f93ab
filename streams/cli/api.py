"""CLI commands for people and scripts: read and change jobs through a worker's HTTP API.

A job may be named by a unique prefix of its id (as `list` prints them): it is looked up first.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from schemas.enums import ActorRole
from streams.cli.api_client import ApiClient, api_url, url_named, whole_id
from streams.clock import utc_now
from streams.devstate import read_dev_state
from streams.errors import UsageError
from streams.moments import moment_of

LIST_PAGE = 500  # the API's largest page: streams/web/listings.py's MAX_LIMIT
JOB_COMMANDS = frozenset({"get", "events", "explain", "cancel", "redrive", "delete-history"})


def run_api_command(arguments: argparse.Namespace) -> int:
    if arguments.command == "principal":
        return _new_principal(arguments)
    if arguments.command == "callbacks" and arguments.action in ("key", "new-secret"):
        return _callback_key(arguments) if arguments.action == "key" else _new_callback_secret()
    token = arguments.token or os.environ.get("SCRAPESTREAM_TOKEN")
    arguments.token = token
    with ApiClient(api_url(arguments.url), token, named=url_named(arguments.url)) as api:
        if arguments.command == "top":
            from streams.cli.top import run_top

            return run_top(api, arguments)
        if arguments.command == "callbacks":
            from streams.cli.callback_replay import run_replay

            return run_replay(api, arguments)
        if arguments.command == "export":
            from streams.cli.export import run_export

            return run_export(api, arguments)
        if arguments.command == "artifact":
            from streams.cli.artifact import run_artifact

            return run_artifact(api, arguments)
        if arguments.command == "monitor":
            from streams.cli.monitor import run_monitor

            return run_monitor(api, arguments)
        if arguments.command in JOB_COMMANDS:
            arguments.job_id = _job_id(api, arguments.job_id)
        answer = _call(api, arguments)
    if arguments.json:
        sys.stdout.write(json.dumps(answer, indent=2) + "\n")
    else:
        _show(arguments, answer)
    return 0


def _job_id(api: ApiClient, given: str) -> str:
    def starting_with(text: str) -> list[str]:
        return [str(job["job_id"]) for job in api.get("/jobs", {"id_prefix": text, "limit": 2})["items"]]

    return whole_id(given, "job", starting_with)


def _call(api: ApiClient, arguments: argparse.Namespace) -> Any:
    command = arguments.command
    if command == "get":
        as_of = None if arguments.as_of is None else moment_of(arguments.as_of, utc_now()).isoformat()
        job: dict[str, Any] = api.get(f"/jobs/{arguments.job_id}", {"as_of": as_of})
        if job.get("callback_host") and not arguments.json and as_of is None:  # the table shows its state
            job["callback_tries"] = api.get(f"/jobs/{arguments.job_id}/callbacks")["items"]
        return job
    if command in ("events", "explain"):
        return api.get(f"/jobs/{arguments.job_id}/{command}")
    if command == "routes":
        as_of = None if arguments.as_of is None else moment_of(arguments.as_of, utc_now()).isoformat()
        return api.get("/routes", {"as_of": as_of})
    if command == "list":
        return _listed(api, arguments)
    if command == "processes":
        return api.get("/processes")
    body: dict[str, Any] = {"reason": arguments.reason}
    if command == "redrive" and arguments.deadline_s is not None:
        body["deadline_at"] = (utc_now() + timedelta(seconds=arguments.deadline_s)).isoformat()
    if command == "redrive" and arguments.cache_mode is not None:
        body["cache_mode"] = arguments.cache_mode
    return api.post(f"/jobs/{arguments.job_id}/{command}", body)


def _listed(api: ApiClient, arguments: argparse.Namespace) -> dict[str, Any]:
    """Up to `--limit` items, read a page (of at most the API's page size) at a time."""
    path = "/dead-letters" if arguments.dead_letters else "/jobs"
    params: dict[str, Any] = {"caller": arguments.caller, "cursor": arguments.cursor}
    if not arguments.dead_letters:
        params |= {"state": arguments.state, "type": arguments.job_type}
        params |= {} if arguments.checks else {"checks": "false"}
    items: list[Any] = []
    while True:
        page: dict[str, Any] = api.get(path, params | {"limit": min(LIST_PAGE, arguments.limit - len(items))})
        items += page["items"]
        params["cursor"] = page.get("next_cursor")
        if params["cursor"] is None or not page["items"] or len(items) >= arguments.limit:
            return page | {"items": items}


def _show(arguments: argparse.Namespace, answer: Any) -> None:
    from rich.console import Console

    from streams.cli.tables import (
        events_table,
        job_table,
        jobs_table,
        print_all,
        processes_table,
        routes_table,
    )

    console = Console()
    command = arguments.command
    if command == "get":
        print_all(console, *job_table(answer))
    elif command == "events":
        print_all(console, events_table(answer["items"]))
    elif command == "explain":
        console.print(f"job {answer['job_id']}: {answer['why']}", highlight=False, markup=False)
        for step in answer["steps"]:
            at = step["at"][:19].replace("T", " ")
            line = f"  #{step['sequence']:<3} {at}  {step['rule']}: {step['said']}"
            console.print(line, highlight=False, markup=False, soft_wrap=True)
    elif command == "routes":
        print_all(console, routes_table(answer["items"]))
    elif command == "processes":
        print_all(console, processes_table(answer["processes"]))
    elif command == "list":
        print_all(console, jobs_table(answer["items"], console.width))
        if answer.get("next_cursor"):
            console.print("more: the next page is --cursor followed by")
            console.print(answer["next_cursor"], soft_wrap=True, highlight=False, markup=False)
    elif answer["outcome"] == "PENDING":
        pending = f"not decided yet (command {answer['command_id']})"
        console.print(f"{command} of {arguments.job_id} submitted; {pending}")
    else:
        console.print(f"{command} of {arguments.job_id}: done ({answer['audit']['detail']})")


def _new_callback_secret() -> int:
    """A Standard Webhooks secret of 32 random bytes, for SCRAPESTREAM_CALLBACK_SECRET."""
    sys.stdout.write(f"whsec_{base64.b64encode(secrets.token_bytes(32)).decode()}\n")
    return 0


def _callback_key(arguments: argparse.Namespace) -> int:
    """A caller's `whsec_` key(s): what its receiver verifies its callbacks with, and nobody else's."""
    from streams.callbacks.keys import callback_keys
    from streams.settings import load_settings

    settings = load_settings()
    keys = callback_keys(settings.callback_secret, settings.callback_key_generations)
    if keys is None:
        dev = read_dev_state()
        if dev is not None and str(dev.get("callbacks", "")).startswith("signed"):
            raise UsageError(
                "SCRAPESTREAM_CALLBACK_SECRET is not set in this shell, but the `scrapestream dev` running "
                "here signs its callbacks with the one set where it started: set that one here too"
            )
        raise UsageError(
            "SCRAPESTREAM_CALLBACK_SECRET is not set in this shell (a worker started from it sends "
            "callbacks unsigned): `scrapestream callbacks new-secret` prints one to start workers with"
        )
    generations = (arguments.generation,) if arguments.generation else keys.generations(arguments.caller)
    for generation in generations:
        sys.stdout.write(f"generation {generation}: {keys.key(arguments.caller, generation)}\n")
    return 0


def _new_principal(arguments: argparse.Namespace) -> int:
    from streams.auth.issue import add_to_file, issue

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
