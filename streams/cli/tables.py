"""What the CLI prints for people: jobs, events and audit records as `rich` tables."""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.table import Table

from projections.lifecycle.attempts import attempt_record_of
from schemas.events import (
    AttemptRecorded,
    AttemptStarted,
    Event,
    JobAccepted,
    JobDispatched,
    JobRedriven,
    LeaseExpired,
    RetryScheduled,
)

STATE_STYLES = {
    "SUCCEEDED": "green",
    "DEAD_LETTER": "red",
    "CANCELLED": "yellow",
    "RUNNING": "cyan",
    "PENDING": "blue",
}
URL_WIDTH = 60


def _state(state: str) -> str:
    style = STATE_STYLES.get(state)
    return f"[{style}]{state}[/]" if style else state


def _short(text: str | None, width: int = URL_WIDTH) -> str:
    text = text or ""
    return text if len(text) <= width else text[: width - 1] + "…"


def _trace(job: dict[str, Any]) -> str:
    """The job's trace id, and its link in the trace viewer this terminal's or the server's setting names."""
    trace_id = job.get("trace_id")
    if not trace_id:
        return "-"
    template = os.environ.get("SCRAPESTREAM_TRACE_URL_TEMPLATE", "")
    url = template.replace("{trace_id}", trace_id) if "{trace_id}" in template else job.get("trace_url")
    return trace_id if not url else f"{trace_id}  {url}"


def _callback(job: dict[str, Any]) -> str:
    """Where the job's outcome is POSTed and how its last try went."""
    host = job.get("callback_host")
    if not host:
        return "-"
    tries = job.get("callback_tries") or []
    if not tries:
        return f"{host}: sent once the job ends"
    last = tries[-1]
    answer = _answer(last)
    before = f" (try {tries[-2]['try_number']} failed, {_answer(tries[-2])})" if len(tries) > 1 else ""
    said = {
        "delivered": f"delivered, {answer} (try {last['try_number']})",
        "failed": f"try {last['try_number']} failed ({answer}); the next is due {last['next_try_at']}",
        "abandoned": f"abandoned after try {last['try_number']} ({answer})",
        "in_flight": f"try {last['try_number']} in flight{before}",
    }
    return f"{host}: {said.get(last['outcome'], last['outcome'])}"


def _answer(callback_try: dict[str, Any]) -> str:
    status = callback_try["http_status"]
    return f"HTTP {status}" if status else callback_try["error"] or "no answer"


def job_table(job: dict[str, Any]) -> list[Table]:
    summary = Table(show_header=False, box=None)
    summary.add_column(style="bold")
    summary.add_column()
    failure = job.get("failure")
    rows = [
        ("job", job["job_id"]),
        ("state", _state(job["state"])),
        ("caller", job["caller_identity"]),
        ("type", job["job_type"]),
        ("request", f"{job['request']['method']} {job['request']['url']}"),
        ("accepted", job["accepted_at"]),
        ("deadline", job["deadline_at"]),
        ("completed", job.get("completed_at") or "-"),
        ("attempts", _attempts(job)),
        ("reused", str(job["reuse_count"])),
        ("failure", "-" if not failure else f"{failure['code']}: {failure['message']}"),
        ("callback", _callback(job)),
        ("trace", _trace(job)),
    ]
    for name, value in rows:
        summary.add_row(name, str(value))
    attempts = Table(title="attempts")
    for column in ("#", "route", "outcome", "status", "bytes", "ms", "failure", "cost"):
        attempts.add_column(column)
    for attempt in job["attempts"]:
        failure = attempt.get("failure")
        cached = attempt.get("cache_age_ms")
        attempts.add_row(
            str(attempt["attempt_number"]),
            "cache" if attempt.get("from_cache") else attempt.get("route_name") or attempt["route"],
            attempt["outcome"] + ("" if cached is None else f" ({cached // 1000} s old)"),
            str(attempt.get("http_status") or "-"),
            str(attempt["bytes"]),
            str(attempt["elapsed_ms"]),
            "-" if not failure else failure["code"],
            attempt["cost"]["actual"],
        )
    artifacts = Table(title="artifacts")
    artifacts.add_column("download", no_wrap=True, min_width=len("/artifacts/") + 36)  # a whole id, always
    for column in ("type", "bytes", "expires"):
        artifacts.add_column(column)
    for artifact in job["artifacts"]:
        artifacts.add_row(
            artifact["download_path"],
            artifact["content_type"],
            str(artifact["size_bytes"]),
            artifact.get("expires_at") or "never",
        )
    return [summary, attempts, artifacts]


def _attempts(job: dict[str, Any]) -> str:
    totals = job["totals"]
    limit = job["attempt_limit"]
    if totals["charged_attempts"] == totals["budget_spent"]:
        return f"{totals['budget_spent']} of {limit} charged ({totals['attempts']} recorded)"
    before = totals["charged_attempts"] - totals["budget_spent"]
    return f"{totals['budget_spent']} of {limit} charged since its redrive ({before} before)"


SHORT_ID = 8  # what `list` shows of a job id; `get` and the other commands take it as a prefix


def jobs_table(jobs: list[dict[str, Any]], width: int = 80) -> Table:
    """Fits `width` columns: short ids, the state, type and time whole, the URL cut to what is left;
    a monitor's check names its monitor."""
    widths = {
        "job": SHORT_ID,
        "state": max((len(job["state"]) for job in jobs), default=len("state")),
        "type": min(max((len(job["job_type"]) for job in jobs), default=len("type")), 14),
        "accepted": len("accepted"),
    }
    if any(job.get("monitor_id") for job in jobs):
        widths["check of"] = SHORT_ID
    url_width = max(12, min(60, width - sum(widths.values()) - 2 * len(widths)))
    table = Table(box=None, pad_edge=False)
    table.add_column("job", no_wrap=True, min_width=widths["job"])
    table.add_column("state", no_wrap=True, min_width=widths["state"])
    table.add_column("type", no_wrap=True, width=widths["type"], overflow="ellipsis")
    table.add_column("url", no_wrap=True, overflow="ellipsis", max_width=url_width)
    table.add_column("accepted", no_wrap=True, min_width=widths["accepted"])
    if "check of" in widths:
        table.add_column("check of", no_wrap=True, min_width=widths["check of"])
    for job in jobs:
        monitor = str(job.get("monitor_id") or "-")[:SHORT_ID]
        table.add_row(
            job["job_id"][:SHORT_ID],
            _state(job["state"]),
            job["job_type"],
            job["request"]["url"],
            job["accepted_at"][11:19],
            *([monitor] if "check of" in widths else []),
        )
    return table


def events_table(events: list[dict[str, Any]]) -> Table:
    table = Table()
    for column in ("seq", "event", "at", "detail"):
        table.add_column(column)
    for event in events:
        table.add_row(
            str(event["sequence"]), event["type"], event["occurred_at"], _short(_essentials(event["data"]))
        )
    return table


def _essentials(data: dict[str, Any]) -> str:
    """What an event's data says that matters: its attempt and failure, retry time, route, reason."""
    parts: list[str] = []
    attempt = data.get("attempt")
    if isinstance(attempt, dict):
        route = "cache" if attempt.get("from_cache") else attempt.get("route_name") or attempt.get("route")
        status = attempt.get("http_status")
        parts.append(f"attempt {attempt['attempt_number']} via {route}: {attempt['outcome']}")
        parts += [f"HTTP {status}"] if status else []
        data = data | {"failure": attempt.get("failure")}
    elif "attempt_number" in data:
        parts.append(f"attempt {data['attempt_number']}")
    failure = data.get("failure")
    if isinstance(failure, dict):
        parts.append(str(failure.get("code")))
    if data.get("next_attempt_at"):
        parts.append(f"retry at {data['next_attempt_at']}")
    for name in ("reason", "action", "outcome", "detail"):
        value = data.get(name)
        if isinstance(value, str) and value and name != "outcome":
            parts.append(value)
    return "; ".join(parts)


def progress_of(event: Event) -> str | None:
    """Where a job is after `event`, in a few words; None for events that change nothing to see."""
    event = attempt_record_of(event) or event  # a success is shown as the attempt it holds
    match event:
        case JobAccepted(first_lease_expires_at=None):
            return "accepted: queued"
        case JobAccepted():
            return "accepted; leased: attempt 1 waits for an executor"
        case JobDispatched():
            return f"leased: attempt {event.attempt_number} waits for an executor"
        case AttemptStarted():
            return f"attempt {event.attempt_number} running"
        case AttemptRecorded():
            attempt = event.attempt
            failure = "" if attempt.failure is None else f" {attempt.failure.code}"
            cached = " (from the cache)" if attempt.from_cache else ""
            return f"attempt {attempt.attempt_number}: {attempt.outcome.value}{failure}{cached}"
        case RetryScheduled():
            return f"retry at {event.next_attempt_at.isoformat()} ({event.failure.code})"
        case LeaseExpired():
            return f"attempt {event.attempt_number}: {event.failure.safe_message}"
        case JobRedriven():
            return "redriven: queued again"
    return None


def completion_line(completion: dict[str, Any]) -> str:
    failure = completion.get("failure")
    detail = "" if not failure else f"  {failure['code']}: {_short(failure['safe_message'])}"
    return f"{completion['completed_at']}  {completion['job_id']}  {_state(completion['status'])}{detail}"


def print_all(console: Console, *renderables: Any) -> None:
    for renderable in renderables:
        console.print(renderable)


UNMETERED = "not metered"  # no price, budget or rate limit: its calls are not reserved, so not counted


def route_figures(route: dict[str, Any]) -> dict[str, str]:
    """What a route's columns say; a route that is not metered counts nothing, so shows no zeros."""
    if not route.get("metered", True):
        return dict.fromkeys(("spent", "remaining", "rate", "outstanding", "granted"), "-") | {
            "spent": UNMETERED,
            "budget": "none",
        }
    return {
        "spent": route["spent_in_period"],
        "budget": route["budget"] or "none",
        "remaining": route["remaining"] or "",
        "rate": str(route["rate"]),
        "outstanding": str(route["reservations_outstanding"]),
        "granted": f"{route['granted']} ({route['denied']} denied)",
    }


def processes_table(processes: list[dict[str, Any]]) -> Table:
    table = Table("process", "pid", "state", "restarts", "memory", "last exit")
    for process in processes:
        resident = process.get("resident_bytes")
        table.add_row(
            str(process["index"]),
            "-" if process.get("pid") is None else str(process["pid"]),
            str(process["state"]),
            str(process["restarts"]),
            "-" if resident is None else f"{resident / 2**20:.0f} MiB",
            process.get("last_exit") or "-",
        )
    return table


ROUTE_COLUMNS = {  # header: what `route_figures` names it; short enough for 80 columns
    "spent": "spent",
    "budget": "budget",
    "left": "remaining",
    "rate/s": "rate",
    "held": "outstanding",
    "granted": "granted",
}


def routes_table(routes: list[dict[str, Any]], columns: tuple[str, ...] = tuple(ROUTE_COLUMNS)) -> Table:
    """A route per row, `columns` of ROUTE_COLUMNS; `held` is reserved and not yet settled."""
    table = Table(box=None, pad_edge=False)
    for header in ("route", "kind", *columns):
        widest = 24 if header == "route" else None
        table.add_column(header, no_wrap=True, overflow="ellipsis", max_width=widest)
    for route in routes:
        said = route_figures(route)
        table.add_row(route["name"], route["kind"], *(said[ROUTE_COLUMNS[header]] for header in columns))
    return table
