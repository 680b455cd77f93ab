"""`scrapestream top`: a live view of the deployment in the terminal, from `GET /overview` and
`GET /routes`, redrawn in place until `q` or Ctrl-C; one frame with `--once`, or without a terminal.

Its completion rate is measured: between two frames from the cluster's job counts (exact), else the
jobs that ended in the last minute when the API read every job of the last hour; never a guess."""

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
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from schemas.errors import ScrapestreamError
from streams.cli.api_client import ApiClient
from streams.cli.tables import ROUTE_COLUMNS, route_figures
from streams.web.summary import TERMINAL

QUIT_KEYS = frozenset("qQ")
ONCE_SAMPLE_S = 1.0
SIDE_BY_SIDE = 100  # columns the lag and routes panels need side by side


def run_top(api: ApiClient, arguments: argparse.Namespace) -> int:
    if arguments.once or not sys.stdout.isatty():  # a script or a pipe: one frame, then done
        rate = Rate()
        overview, routes = _ask(api)  # a failure is the command's: it exits 1 saying why
        if overview["cluster"] is not None:  # a rate needs two counts: measured over a second
            rate.shown(overview)
            time.sleep(ONCE_SAMPLE_S)
            overview, routes = _ask(api)
        console = Console()
        console.print(_frame(api.url, overview, routes, rate, None, console.width))
        return 0
    rate = Rate()
    with _keys() as pressed, Live(Text("asking the API…"), auto_refresh=False, screen=False) as live:
        try:
            while True:
                live.update(_view(api, arguments.interval, rate, live.console.width), refresh=True)
                if pressed(arguments.interval) & QUIT_KEYS:
                    return 0
        except KeyboardInterrupt:
            return 0


def _ask(api: ApiClient) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return api.get("/overview"), api.get("/routes")["items"]


class Rate:
    """Completions per second between consecutive frames, from the cluster's terminal job counts."""

    def __init__(self) -> None:
        self._last: tuple[float, int] | None = None

    def shown(self, overview: dict[str, Any]) -> str:
        cluster = overview["cluster"]
        if cluster is not None:
            ended = sum(count for state, count in cluster["jobs"].items() if state in TERMINAL)
            now, last = time.monotonic(), self._last
            self._last = (now, ended)
            if last is not None and now > last[0]:
                return (
                    f"completions/s (last {now - last[0]:.1f} s) {(ended - last[1]) / (now - last[0]):,.2f}"
                )
        if overview["completed_last_minute"] is not None:
            return f"completions/s (last 60 s) {overview['completed_last_minute'] / 60:,.2f}"
        return (
            f"completions/s measured from the next frame (more than {overview['recent_limit']:,} recent jobs)"
        )


def _view(api: ApiClient, interval: float, rate: Rate, width: int) -> Group:
    try:
        overview, routes = _ask(api)
    except ScrapestreamError as exc:
        return Group(Text(f"scrapestream top · {api.url}"), Text(str(exc), style="red"), _footer(interval))
    return _frame(api.url, overview, routes, rate, interval, width)


def _frame(
    url: str,
    overview: dict[str, Any],
    routes: list[dict[str, Any]],
    rate: Rate,
    interval: float | None,
    width: int,
) -> Group:
    """One frame; lag and routes side by side when `width` has room, else one above the other."""
    states = _table("Jobs per state", "state", "jobs")
    for state, count in overview["states"].items():
        states.add_row(state, f"{count:,}")
    hosts = _table(f"Busiest hosts, last hour{_scope(overview)}", "host", "jobs", "running")
    for load in overview["hosts"][:8]:
        hosts.add_row(load["host"], f"{load['jobs']:,}", f"{load['active']:,}")
    shown = ("spent", "budget", "rate/s", "held")
    spend = _table("Routes", "route", *shown)
    for route in routes:
        said = route_figures(route)
        spend.add_row(route["name"], *(said[ROUTE_COLUMNS[header]] for header in shown))
    top = Table.grid(padding=(0, 4))
    top.add_row(states, hosts)
    bottom = Table.grid(padding=(0, 4))
    cluster = overview["cluster"]
    if cluster is not None:
        lag = _table("Lag", "topic", "records")
        for topic, records in cluster["lag"].items():
            lag.add_row(topic, f"{records:,}" + (" behind" if topic in cluster["behind"] else ""))
        bottom.add_row(lag, spend) if width >= SIDE_BY_SIDE else bottom.add_row(Group(lag, spend))
    else:
        bottom.add_row(spend)
    parts: list[Any] = [_header(url, overview, rate.shown(overview)), top, bottom]
    if cluster is not None and cluster["unowned"]:
        parts.append(Text(f"partitions {cluster['unowned']} are unowned", style="red"))
    return Group(*parts, *([] if interval is None else [_footer(interval)]))


def _scope(overview: dict[str, Any]) -> str:
    """What the last hour's figures are of, when the API read only the newest jobs."""
    if overview["recent_jobs"] < overview["recent_limit"]:
        return ""
    return f" (of the newest {overview['recent_limit']:,} jobs)"


def _table(title: str, *columns: str) -> Table:
    return Table(*columns, title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)


def _header(url: str, overview: dict[str, Any], rate: str) -> Text:
    latency = overview["latency_ms"] or {}
    shown = " ".join(f"{name} {ms:,.0f} ms" for name, ms in latency.items()) or "none finished"
    outcomes = " · ".join(f"{state.lower()} {count:,}" for state, count in overview["outcomes"].items())
    return Text(
        f"scrapestream top · {url} · {overview['at'][:19].replace('T', ' ')} UTC\n"
        f"{rate} · last hour{_scope(overview)}: {outcomes or 'nothing ended'}\n"
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
