"""`scrapestream top`: a live view of the deployment in the terminal, from `GET /overview` and
`GET /routes`, redrawn in place until `q` or Ctrl-C."""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import sys
import termios
import time
import tty
from collections.abc import Iterator
from typing import Any

from rich import box
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from schemas.errors import ScrapestreamError
from streams.api_client import ApiClient

QUIT_KEYS = frozenset("qQ")


def run_top(api: ApiClient, arguments: argparse.Namespace) -> int:
    with _keys() as pressed, Live(Text("asking the API…"), auto_refresh=False, screen=False) as live:
        try:
            while True:
                live.update(_view(api, arguments.interval), refresh=True)
                if pressed(arguments.interval) & QUIT_KEYS:
                    return 0
        except KeyboardInterrupt:
            return 0


def _view(api: ApiClient, interval: float) -> Group:
    try:
        overview = api.get("/overview")
        routes = api.get("/routes")["items"]
    except ScrapestreamError as exc:
        return Group(Text(f"scrapestream top · {api.url}"), Text(str(exc), style="red"), _footer(interval))
    states = _table("Jobs per state", "state", "jobs")
    for state, count in overview["states"].items():
        states.add_row(state, f"{count:,}")
    hosts = _table("Busiest hosts, last hour", "host", "jobs", "running")
    for load in overview["hosts"][:8]:
        hosts.add_row(load["host"], f"{load['jobs']:,}", f"{load['active']:,}")
    spend = _table("Routes", "route", "spent this period", "budget", "rate/s", "outstanding")
    for route in routes:
        outstanding = str(route["reservations_outstanding"])
        budget = route["budget"] or "none"
        spend.add_row(route["name"], route["spent_in_period"], budget, str(route["rate"]), outstanding)
    top = Table.grid(padding=(0, 4))
    top.add_row(states, hosts)
    bottom = Table.grid(padding=(0, 4))
    cluster = overview["cluster"]
    if cluster is not None:
        lag = _table("Lag", "topic", "records")
        for topic, records in cluster["lag"].items():
            lag.add_row(topic, f"{records:,}" + (" behind" if topic in cluster["behind"] else ""))
        bottom.add_row(lag, spend)
    else:
        bottom.add_row(spend)
    parts: list[Any] = [_header(api.url, overview), top, bottom]
    if cluster is not None and cluster["unowned"]:
        parts.append(Text(f"partitions {cluster['unowned']} are unowned", style="red"))
    return Group(*parts, _footer(interval))


def _table(title: str, *columns: str) -> Table:
    return Table(*columns, title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)


def _header(url: str, overview: dict[str, Any]) -> Text:
    chart = overview["completions"]
    last_minute = sum(series[-2] for series in chart["y"]) if len(chart["x"]) > 1 else 0.0
    latency = overview["latency_ms"] or {}
    shown = " ".join(f"{name} {ms:,.0f} ms" for name, ms in latency.items()) or "none finished"
    outcomes = " · ".join(f"{state.lower()} {count:,}" for state, count in overview["outcomes"].items())
    return Text(
        f"scrapestream top · {url} · {overview['at'][:19].replace('T', ' ')} UTC\n"
        f"completions/s (last minute) {last_minute:,.1f} · last hour: {outcomes or 'nothing ended'}\n"
        f"submit→completion {shown} · states of {overview['states_of']}"
    )


def _footer(interval: float) -> Text:
    return Text(f"q quits · every {interval:g} s", style="dim")


@contextlib.contextmanager
def _keys() -> Iterator[Any]:
    """A function that waits up to a given time and returns the keys typed meanwhile; the terminal
    reads keys one by one (no echo) until the view ends."""
    stdin = sys.stdin
    if not stdin.isatty():

        def sleeping(seconds: float) -> frozenset[str]:
            time.sleep(seconds)
            return frozenset()

        yield sleeping
        return
    descriptor = stdin.fileno()
    saved = termios.tcgetattr(descriptor)
    tty.setcbreak(descriptor)

    def pressed(seconds: float) -> frozenset[str]:
        ready, _, _ = select.select([descriptor], [], [], seconds)
        if not ready:
            return frozenset()
        typed = os.read(descriptor, 64)
        return frozenset(typed.decode(errors="replace")) if typed else QUIT_KEYS  # the terminal is gone

    try:
        yield pressed
    finally:
        termios.tcsetattr(descriptor, termios.TCSADRAIN, saved)
