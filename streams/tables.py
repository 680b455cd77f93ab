"""What the CLI prints for people: jobs, events and audit records as `rich` tables."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

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
        ("attempts", f"{job['totals']['attempts']} of {job['attempt_limit']} allowed"),
        ("reused", str(job["reuse_count"])),
        ("failure", "-" if not failure else f"{failure['code']}: {failure['message']}"),
    ]
    for name, value in rows:
        summary.add_row(name, str(value))
    attempts = Table(title="attempts")
    for column in ("#", "route", "outcome", "status", "bytes", "ms", "failure", "cost"):
        attempts.add_column(column)
    for attempt in job["attempts"]:
        failure = attempt.get("failure")
        attempts.add_row(
            str(attempt["attempt_number"]),
            attempt["route"],
            attempt["outcome"],
            str(attempt.get("http_status") or "-"),
            str(attempt["bytes"]),
            str(attempt["elapsed_ms"]),
            "-" if not failure else failure["code"],
            attempt["cost"]["actual"],
        )
    artifacts = Table(title="artifacts")
    for column in ("download", "type", "bytes", "expires"):
        artifacts.add_column(column)
    for artifact in job["artifacts"]:
        artifacts.add_row(
            artifact["download_path"],
            artifact["content_type"],
            str(artifact["size_bytes"]),
            artifact.get("expires_at") or "never",
        )
    return [summary, attempts, artifacts]


def jobs_table(jobs: list[dict[str, Any]]) -> Table:
    table = Table()
    for column in ("job", "state", "caller", "type", "url", "attempts", "accepted"):
        table.add_column(column)
    for job in jobs:
        table.add_row(
            job["job_id"],
            _state(job["state"]),
            job["caller_identity"],
            job["job_type"],
            _short(job["request"]["url"]),
            str(job["totals"]["attempts"]),
            job["accepted_at"],
        )
    return table


def events_table(events: list[dict[str, Any]]) -> Table:
    table = Table()
    for column in ("seq", "event", "at", "detail"):
        table.add_column(column)
    for event in events:
        data = event["data"]
        detail = data.get("reason") or data.get("status") or data.get("action") or ""
        attempt = data.get("attempt")
        if isinstance(attempt, dict):
            detail = f"attempt {attempt['attempt_number']}: {attempt['outcome']}"
        table.add_row(str(event["sequence"]), event["type"], event["occurred_at"], _short(str(detail)))
    return table


def completion_line(completion: dict[str, Any]) -> str:
    failure = completion.get("failure")
    detail = "" if not failure else f"  {failure['code']}: {_short(failure['safe_message'])}"
    return f"{completion['completed_at']}  {completion['job_id']}  {_state(completion['status'])}{detail}"


def print_all(console: Console, *renderables: Any) -> None:
    for renderable in renderables:
        console.print(renderable)
