"""`scrapestream monitor`: watch pages through a worker's HTTP API: add, list, get, pause, resume,
delete, and the changes a monitor found (with their diffs, escaped for the terminal)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.table import Table

from streams.cli.api_client import ApiClient, whole_id
from streams.cli.terminal import printable
from streams.errors import UsageError

LIST_PAGE = 500


def run_monitor(api: ApiClient, arguments: argparse.Namespace) -> int:
    answer = _call(api, arguments)
    if arguments.json:
        sys.stdout.write(json.dumps(answer, indent=2) + "\n")
    else:
        _show(arguments.action, answer)
    return 0


def _call(api: ApiClient, arguments: argparse.Namespace) -> Any:
    action = arguments.action
    if action == "add":
        return api.post("/monitors", _body(arguments))
    if action == "list":
        return _listed(api, arguments.caller)
    path = f"/monitors/{_monitor_id(api, arguments.monitor_id)}"
    if action == "get":
        return api.get(path)
    if action in ("changes", "checks"):
        return api.get(f"{path}/{action}")
    if action == "delete":
        return api.delete(path)
    return api.post(f"{path}/{action}", {"reason": arguments.reason})


def _monitor_id(api: ApiClient, given: str) -> str:
    def starting_with(text: str) -> list[str]:
        listed = _listed(api, None)["items"]
        return [str(item["monitor_id"]) for item in listed if str(item["monitor_id"]).startswith(text)]

    return whole_id(given, "monitor", starting_with)


def _body(arguments: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": arguments.name,
        "url": arguments.page,
        "time_zone": arguments.time_zone,
        "jitter_s": arguments.jitter,
        "watch": arguments.watch or [],
        "ignore": arguments.ignore or [],
        "trigger": arguments.trigger or [],
        "drop": arguments.drop or [],
        "insensitive": arguments.insensitive,
        "product": arguments.product,
        "job_type": arguments.job_type,
        "conditional": not arguments.unconditional,
    }
    caller = arguments.caller or (None if arguments.token else "cli")  # as `submit` names an unsigned caller
    if caller is not None:
        body["caller_identity"] = caller
    if arguments.every is not None:
        body["every_s"] = arguments.every
    if arguments.cron is not None:
        body["cron"] = arguments.cron
    if arguments.select is not None:
        body["select"] = arguments.select
    if arguments.visual is not None:
        body |= {
            "visual_threshold": arguments.visual,
            "job_type": "browser.render",
            "capture_mode": "SCREENSHOT",
        }
    if arguments.callback_url is not None:
        body["callback_url"] = arguments.callback_url
    if arguments.window is not None:
        start, separator, end = arguments.window.partition("-")
        if not separator:
            raise UsageError(f"--window {arguments.window!r} is not START-END, e.g. 09:00-18:00")
        body["window"] = {"start": start.strip(), "end": end.strip()}
    return body


def _listed(api: ApiClient, caller: str | None) -> dict[str, Any]:
    items: list[Any] = []
    params: dict[str, Any] = {"caller": caller, "limit": LIST_PAGE}
    while True:
        page: dict[str, Any] = api.get("/monitors", params)
        items += page["items"]
        params["cursor"] = page.get("next_cursor")
        if params["cursor"] is None or not page["items"]:
            return {"items": items}


def _show(action: str, answer: Any) -> None:
    console = Console(highlight=False)
    if action == "list":
        console.print(_monitors_table(answer["items"]))
    elif action == "changes":
        for change in answer["items"]:
            console.print("\n".join(_change_lines(change)), markup=False, soft_wrap=True)
    elif action == "checks":
        console.print(_checks_table(answer["items"]))
    else:
        console.print(_monitor_lines(answer), markup=False, soft_wrap=True)


def _change_lines(change: dict[str, Any]) -> Iterator[str]:
    """A change as `monitor changes` prints it: its kind, what it is typed as, its diffs."""
    counts = f"+{change['lines_added']} -{change['lines_removed']}"
    yield f"{change['detected_at'][:19]}  {change['kind']}  {counts}"
    if change["offer"]:
        yield _offer_line(change["offer"])
    if change["visual"]:
        yield _visual_line(change["visual"])
    yield from (printable(line) for line in change["diff"].splitlines())
    if change["word_diff"]:
        yield "by word:"
        yield from (f"  {printable(line)}" for line in change["word_diff"].splitlines())
    if change["diff_truncated"]:
        yield "  (diff cut at its bound: the artifacts hold the whole pages)"


def _offer_line(change: dict[str, Any]) -> str:
    """`PRICE_CHANGED  19.99 EUR InStock -> 17.49 EUR InStock`: what a product's offer was and is."""

    def shown(offer: dict[str, Any] | None) -> str:
        parts = [] if offer is None else [offer["amount"], offer["currency"], offer["availability"]]
        return printable(" ".join(part for part in parts if part)) or "-"

    kinds = ", ".join(change["kinds"]) or "offer"
    return f"  {kinds}  {shown(change['previous'])} -> {shown(change['current'])}"


def _visual_line(visual: dict[str, Any]) -> str:
    """`12.50% of pixels changed (threshold 2.00%), marked in /monitors/…/difference`."""
    line = f"  {visual['ratio']:.2%} of pixels changed (threshold {visual['threshold']:.2%})"
    difference = visual["difference"]
    return line + (f", marked in {difference['download_path']}" if difference else "")


def _monitor_lines(monitor: dict[str, Any]) -> str:
    schedule = monitor["schedule"]
    when = f"every {schedule['every_s']} s" if schedule["every_s"] else f"cron {schedule['cron']!r}"
    lines = [
        f"monitor  {monitor['monitor_id']}  {printable(monitor['name'])!r}",
        f"owner    {printable(monitor['caller_identity'])}",
        f"url      {printable(monitor['url'])}",
        f"state    {monitor['state']}{_paused_because(monitor)}, {when} ({schedule['time_zone']})",
        f"next     {monitor['next_check_at'] or '-'}",
        f"checks   {monitor['checks']} ({monitor['missed']} missed), changes {monitor['changes']}",
    ]
    compared = [
        *(f"watch {printable(selector)!r}" for selector in monitor["watch"]),
        *(f"ignore {printable(selector)!r}" for selector in monitor["ignore"]),
        *([f"select {printable(monitor['select'])!r}"] if monitor["select"] else []),
        *(f"trigger {printable(pattern)!r}" for pattern in monitor["trigger"]),
        *(f"drop {printable(pattern)!r}" for pattern in monitor["drop"]),
        *(["case and whitespace ignored"] if monitor["insensitive"] else []),
        *(["the product's offer (price, stock)"] if monitor["product"] else []),
        *(
            [f"screenshots, a change over {monitor['visual_threshold']:.2%} of pixels"]
            if monitor["visual_threshold"] is not None
            else []
        ),
    ]
    if compared:
        lines.append(f"compares {', '.join(compared)}")
    if monitor["checking"]:
        lines.append(f"checking job {monitor['checking']}")
    return "\n".join(lines)


def _paused_because(monitor: dict[str, Any]) -> str:
    reason = monitor.get("pause_reason")
    return f" ({printable(reason)!r})" if monitor["state"] == "paused" and reason else ""


def _monitors_table(monitors: list[dict[str, Any]]) -> Table:
    table = Table(box=None, pad_edge=False)
    for column in ("monitor", "name", "state", "next check", "changes", "url"):
        table.add_column(column, no_wrap=True, overflow="ellipsis", max_width=36)
    for monitor in monitors:
        table.add_row(
            monitor["monitor_id"][:8],
            printable(monitor["name"]),
            monitor["state"],
            (monitor["next_check_at"] or "-")[:19],
            str(monitor["changes"]),
            printable(monitor["url"]),
        )
    return table


def _checks_table(checks: list[dict[str, Any]]) -> Table:
    table = Table(box=None, pad_edge=False)
    for column in ("due", "job", "status", "http", "change", "detail"):
        table.add_column(column, no_wrap=True, overflow="ellipsis", max_width=40)
    for check in checks:
        table.add_row(
            check["due_at"][:19],
            check["check_job_id"][:8],
            check["status"] or "running",
            str(check["http_status"] or "-"),
            check["change"] or "-",
            printable(check["detail"]),
        )
    return table
