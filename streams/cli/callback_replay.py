"""`scrapestream callbacks replay`: the callbacks of matching finished jobs, delivered again.

Each is the API's `POST /jobs/{id}/replay-callback` (an operator's or admin's, audited), sent at
most `--per-receiver-per-s` a second to any one receiving host, with a progress bar.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter, defaultdict
from typing import Any
from urllib.parse import urlsplit

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from schemas.errors import ScrapestreamError
from streams.cli.api_client import ApiClient, ApiRequestError
from streams.cli.exits import EXIT_FAILED
from streams.clock import utc_now
from streams.moments import moment_of

PAGE = 500
TERMINAL = ["SUCCEEDED", "DEAD_LETTER", "CANCELLED"]
BUSY = "its callback is still being delivered"


def run_replay(api: ApiClient, arguments: argparse.Namespace) -> int:
    jobs = _matching(api, arguments)
    override = None if arguments.to is None else urlsplit(arguments.to).hostname or ""
    chosen = [(job, override or job["callback_host"]) for job in jobs if (override or job["callback_host"])]
    out = Console()
    if arguments.dry_run:
        return _dry_run(out, jobs, chosen)
    said: Counter[str] = Counter()
    interval = 1.0 / arguments.per_receiver_per_s
    next_at: dict[str, float] = defaultdict(time.monotonic)
    columns = (TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True)) as progress:
        task = progress.add_task("replaying", total=len(chosen))
        for job, host in chosen:
            time.sleep(max(0.0, next_at[host] - time.monotonic()))
            next_at[host] = max(next_at[host], time.monotonic()) + interval
            outcome = _replay(api, job["job_id"], arguments)
            said[outcome if outcome in ("replayed", "pending") else "refused"] += 1
            if outcome not in ("replayed", "pending"):
                progress.console.print(f"{job['job_id']}: {outcome}", highlight=False, markup=False)
            progress.advance(task)
    shown = ", ".join(f"{count} {name}" for name, count in sorted(said.items())) or "nothing to replay"
    out.print(f"{len(chosen)} callbacks of {len(jobs)} matching jobs: {shown}", highlight=False)
    return EXIT_FAILED if said["refused"] else 0


def _dry_run(out: Console, jobs: list[dict[str, Any]], chosen: list[tuple[dict[str, Any], str]]) -> int:
    """What the run would do, job by job, as the lifecycle would decide it now."""
    busy = 0
    for job, host in chosen:
        if job.get("callbacks_pending"):
            busy += 1
            said = f"would be refused: {BUSY} (replay it once it is delivered or abandoned)"
        else:
            said = f"to {host}"
        out.print(f"{job['job_id']}  {job['state']:<11}  {said}", highlight=False)
    unset = len(jobs) - len(chosen)
    out.print(
        f"{len(chosen) - busy} of {len(jobs)} matching jobs would have their callback replayed, {busy} would "
        f"be refused ({BUSY}), {unset} have no callback URL (dry run)",
        highlight=False,
    )
    return 0


def _matching(api: ApiClient, arguments: argparse.Namespace) -> list[dict[str, Any]]:
    now = utc_now()
    params = {
        "caller": arguments.caller,
        "state": arguments.status or TERMINAL,
        "since": moment_of(arguments.since, now).isoformat(),
        "until": None if arguments.until is None else moment_of(arguments.until, now).isoformat(),
    }
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = api.get("/jobs", params | {"limit": PAGE, "cursor": cursor})
        found += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return found


def _replay(api: ApiClient, job_id: str, arguments: argparse.Namespace) -> str:
    body = {"reason": arguments.reason, "callback_url": arguments.to}
    try:
        answer = api.post(f"/jobs/{job_id}/replay-callback", body)
    except ApiRequestError as exc:
        return str(exc)
    except ScrapestreamError as exc:
        return str(exc)
    return "replayed" if answer["outcome"] == "ALLOWED" else "pending"
