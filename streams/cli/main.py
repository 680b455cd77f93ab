"""The `scrapestream` command: its parser, and the dispatch to each command's module.

Only what every command needs is imported here; a command loads its own modules when it runs, so
`get`, `list`, `events` and `submit` start without the worker's (FastAPI, Playwright, RocksDB).
Exit codes: 0 done (a waited job `SUCCEEDED`), 1 failed (a job that did not succeed, a rejected
submission, an error), 2 a usage or settings mistake, 3 timed out waiting, 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import sys
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any, NoReturn

from schemas.enums import (
    ActorRole,
    CacheMode,
    CaptureMode,
    JobStatus,
    PolicyClass,
    RetentionClass,
    TransportPolicy,
)
from streams.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE

API_COMMANDS = frozenset(
    {
        "get",
        "list",
        "events",
        "explain",
        "cancel",
        "redrive",
        "delete-history",
        "principal",
        "top",
        "export",
        "artifact",
        "callbacks",
        "routes",
        "monitor",
        "processes",
    }
)
KAFKA_COMMANDS = frozenset({"submit", "watch", "replay", "topics", "tail", "acls"})


class _HelpFormatter(argparse.HelpFormatter):
    """Each option's default said once: its help's own `(default: …)`, else the parser's value."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_text = action.help or ""
        if "default:" in help_text or action.default in (None, False, argparse.SUPPRESS):
            return help_text
        if action.option_strings and action.nargs != 0:
            return f"{help_text} (default: {action.default})".strip()
        return help_text


class _Parser(argparse.ArgumentParser):
    """A parser whose unknown options are named by the (sub)command they were given to."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extra = super().parse_known_args(args, namespace)
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed, extra

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument -") and message.endswith("expected one argument"):
            option = message.removeprefix("argument ").split(":")[0].split("/")[-1]
            message += f" (a value beginning with '-' is given as {option}=VALUE)"
        super().error(message)


def _choices(values: Iterable[StrEnum]) -> list[str]:
    return [value.value for value in values]


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="scrapestream", description="Event-sourced scrape jobs on Kafka.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    commands = parser.add_subparsers(dest="command", required=True)
    dev = commands.add_parser("dev", help="embedded broker + worker + HTTP API, for local use")
    dev.add_argument("--allow-private", action="store_true", help="let jobs fetch loopback/private addresses")
    dev.add_argument(
        "--port", type=int, default=None, help="HTTP port (default: SCRAPESTREAM_WEB_PORT, else a free one)"
    )
    worker = commands.add_parser(
        "worker", help="join the cluster at SCRAPESTREAM_KAFKA_BOOTSTRAP and run every agent"
    )
    worker.add_argument("--supervised-as", type=int, default=None, help=argparse.SUPPRESS)
    worker.add_argument("--front", default=None, help=argparse.SUPPRESS)
    worker.add_argument("--alone", action="store_true", help=argparse.SUPPRESS)
    for serving in (dev, worker):
        serving.add_argument(
            "--processes",
            type=_processes,
            default=None,
            help="worker processes behind the one HTTP port (default: SCRAPESTREAM_PROCESSES, else auto: "
            "one per core)",
        )
    dev.set_defaults(supervised_as=None, front=None, alone=True)
    _submit_parser(commands)
    watch = commands.add_parser("watch", help="print completions as they are published")
    start = watch.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the oldest completion")
    start.add_argument(
        "--since", help="start at the completions published since: a duration (2h, 30m) or an RFC 3339 time"
    )
    watch.add_argument("--json", action="store_true", help="print one JSON record per line")
    tail = commands.add_parser("tail", help="print any topic's records, decoded (docs/CONTRACT.md)")
    tail.add_argument(
        "topic", help="a topic's kind (completions, answers, dead-input, submit, …) or full name"
    )
    tail.add_argument("--from-beginning", action="store_true", help="start at the oldest record")
    tail.add_argument("--count", type=int, default=None, help="stop after this many records")
    tail.add_argument("--until-end", action="store_true", help="stop at the end the topic had at the start")
    tail.add_argument("--json", action="store_true", help="print one JSON document per record")
    _api_parsers(commands)
    _monitor_parser(commands)
    topics = commands.add_parser(
        "topics", help="create, check or describe the topics the settings say a deployment needs"
    )
    topics.add_argument("action", choices=["create", "check", "describe"])
    topics.add_argument(
        "--type",
        dest="job_types",
        action="append",
        default=[],
        help="also a job type's due topic (repeatable)",
    )
    _acls_parser(commands)
    replay = commands.add_parser("replay", help="rebuild the lifecycle store from the events topic")
    target = replay.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--verify", action="store_true", help="compare a rebuild with SCRAPESTREAM_DATA_DIR's store"
    )
    target.add_argument("--into", help="rebuild into this (new) directory")
    return parser


def _submit_parser(commands: argparse._SubParsersAction[_Parser]) -> None:
    submit = commands.add_parser(
        "submit",
        help="publish a SubmitJob",
        description="Publish a SubmitJob to SCRAPESTREAM_TOPIC_PREFIX.submit (signed as "
        "SCRAPESTREAM_PRINCIPAL when a signing key is set) and say whether it created a job, reused "
        "one or was rejected. Unset options leave the field to the submission's own default.",
    )
    submit.add_argument("url", nargs="?", help="the page to fetch (http or https)")
    submit.add_argument(
        "--from",
        dest="source",
        metavar="FILE",
        help="submit every line of FILE (`-`: standard input): a URL, or a JSON object with the fields "
        "POST /jobs takes; the options below are the defaults of each line",
    )
    submit.add_argument("--type", dest="job_type", default=None, help="job type (default: http.fetch)")
    submit.add_argument(
        "--transport", choices=_choices(TransportPolicy), help="routes the job may use (default: DIRECT_ONLY)"
    )
    submit.add_argument("--capture", choices=_choices(CaptureMode), help="what is stored (default: RAW_BODY)")
    submit.add_argument(
        "--policy-class",
        choices=_choices(PolicyClass),
        help="response limits and robots.txt (default: STANDARD)",
    )
    submit.add_argument(
        "--cache-mode",
        choices=_choices(CacheMode),
        help="how the response cache may answer (default: REUSE_VALID)",
    )
    submit.add_argument(
        "--retention",
        choices=_choices(RetentionClass),
        help="how long artifacts are kept (default: CACHE_7D)",
    )
    submit.add_argument(
        "--wait-until", help="rendering: load, domcontentloaded or networkidle (default: load)"
    )
    submit.add_argument("--wait-selector", help="rendering: a CSS selector the page must then have")
    submit.add_argument("--viewport", type=_viewport, help="rendering: WIDTHxHEIGHT (default: 1280x720)")
    submit.add_argument("--full-page", action="store_true", help="rendering: screenshot the whole page")
    submit.add_argument("--caller", help="caller identity (default: the signing principal, else cli)")
    submit.add_argument("--callback-url", help="where the outcome is POSTed, signed")
    submit.add_argument(
        "--idempotency-key",
        help="the key naming one job; not with --from (default: a hash of the request and its options)",
    )
    submit.add_argument("--deadline-s", type=_after_now, default=3600.0, help="deadline from now, in seconds")
    submit.add_argument(
        "--wait", action="store_true", help="show where the job is until it ends; exit 0 if it succeeds"
    )
    submit.add_argument("--timeout-s", type=float, default=300.0, help="how long --wait waits (exit 3 after)")
    submit.add_argument("--json", action="store_true", help="print JSON")


def _api_parsers(commands: argparse._SubParsersAction[_Parser]) -> None:
    """The subcommands that use the HTTP API (`--url`, `--token`, `--json`)."""
    get = _api_command(commands, "get", "show a job: state, attempts, artifacts")
    get.add_argument("job_id", help="a job id, or a prefix of one (as `list` shows)")
    get.add_argument("--as-of", help="the job as it was then: a duration ago (10m, 2h) or an RFC 3339 time")
    listing = _api_command(commands, "list", "list jobs, newest first")
    listing.add_argument("--state", action="append", choices=[s.value for s in JobStatus], help="repeatable")
    listing.add_argument("--caller")
    listing.add_argument("--type", dest="job_type")
    listing.add_argument("--limit", type=_positive, default=20, help="at most this many jobs (any number)")
    listing.add_argument("--cursor", help="`next_cursor` of the previous page")
    listing.add_argument("--dead-letters", action="store_true", help="only dead-lettered jobs")
    listing.add_argument(
        "--checks", action="store_true", help="monitors' scheduled checks too (marked with their monitor)"
    )
    events = _api_command(commands, "events", "show a job's history")
    events.add_argument("job_id", help="a job id, or a prefix of one")
    explained = _api_command(commands, "explain", "say why a job is where it is, decision by decision")
    explained.add_argument("job_id", help="a job id, or a prefix of one")
    for name, summary in (
        ("cancel", "cancel a job"),
        ("redrive", "run a dead-lettered job again (admin); it asks the origin again"),
        ("delete-history", "delete a finished job's history (admin)"),
    ):
        mutation = _api_command(commands, name, summary)
        mutation.add_argument("job_id", help="a job id, or a prefix of one")
        mutation.add_argument("--reason", required=True)
        if name == "redrive":
            mutation.add_argument("--deadline-s", type=_after_now, help="a new deadline, in seconds from now")
            mutation.add_argument(
                "--cache-mode",
                choices=_choices(CacheMode),
                help="how the cache may answer it (default: BYPASS)",
            )
    _api_command(commands, "processes", "show the worker's processes: pid, state, restarts, memory")
    routes = _api_command(commands, "routes", "show each route's budget, spend, rate and reservations")
    routes.add_argument("--as-of", help="as the ledger stood then: a duration ago (2h) or an RFC 3339 time")
    top = _api_command(commands, "top", "a live view: rates, states, lag, busiest hosts, routes (q quits)")
    top.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    top.add_argument("--once", action="store_true", help="print one frame and exit (as without a terminal)")
    export = _api_command(commands, "export", "download the artifacts of matching jobs (resumable)")
    export.add_argument("--to", required=True, help="directory to write them to (created if missing)")
    export.add_argument("--state", action="append", choices=[s.value for s in JobStatus], help="repeatable")
    export.add_argument("--since", help="accepted since: a duration (90s, 30m, 1h, 2d) or an RFC 3339 time")
    export.add_argument("--caller")
    export.add_argument("--type", dest="job_type")
    artifact = _api_command(commands, "artifact", "download one artifact, its SHA-256 checked")
    artifact.add_argument("artifact_id", metavar="ARTIFACT_ID", help="as `get` lists it (/artifacts/ID)")
    artifact.add_argument("-o", "--output", help="the file to write (default: ID.EXTENSION here)")
    callbacks = commands.add_parser("callbacks", help="callbacks of finished jobs; each caller's signing key")
    actions = callbacks.add_subparsers(dest="action", required=True)
    key = actions.add_parser(
        "key",
        help="print a caller's callback signing key (from SCRAPESTREAM_CALLBACK_SECRET), for its receiver",
    )
    key.add_argument("--caller", required=True, help="the caller whose callbacks the receiver verifies")
    key.add_argument("--generation", type=int, help="this generation (default: each that signs now)")
    actions.add_parser(
        "new-secret", help="print a new random SCRAPESTREAM_CALLBACK_SECRET (whsec_…) to start workers with"
    )
    replay = actions.add_parser(
        "replay",
        help="deliver the callbacks of matching finished jobs again, with their original webhook-ids",
    )
    replay.add_argument("--url", help="API base URL (default: SCRAPESTREAM_URL, else a running dev)")
    replay.add_argument("--token", help="bearer token of an operator or admin (default: SCRAPESTREAM_TOKEN)")
    replay.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    replay.add_argument("--caller", help="only this caller's jobs")
    replay.add_argument("--since", required=True, help="accepted since: a duration (2h) or an RFC 3339 time")
    replay.add_argument("--until", help="accepted until: a duration ago or an RFC 3339 time")
    replay.add_argument(
        "--status", action="append", choices=["SUCCEEDED", "DEAD_LETTER", "CANCELLED"], help="repeatable"
    )
    replay.add_argument("--to", help="deliver to this URL instead of each job's own callback URL")
    replay.add_argument("--reason", required=True, help="recorded in each job's audit")
    replay.add_argument("--dry-run", action="store_true", help="list what would be replayed, replay nothing")
    replay.add_argument(
        "--per-receiver-per-s", type=float, default=10.0, help="at most this many a second per host"
    )
    principal = commands.add_parser("principal", help="manage principals")
    new = principal.add_subparsers(dest="action", required=True).add_parser(
        "new", help="create a principal: prints its token and signing key once"
    )
    new.add_argument("name")
    new.add_argument("--role", required=True, choices=[role.value for role in ActorRole])
    new.add_argument("--file", help="add the principal to this principals file (created if missing)")
    new.add_argument("--json", action="store_true", help="print JSON")


def _acls_parser(commands: argparse._SubParsersAction[_Parser]) -> None:
    from streams.broker.acls import ROLES

    acls = commands.add_parser(
        "acls", help="the Kafka ACLs a principal needs for a role; --apply creates them"
    )
    acls.add_argument("--role", required=True, choices=ROLES, help="what the principal does")
    acls.add_argument("--principal", required=True, help="the principal, as User:NAME")
    acls.add_argument("--group-prefix", help="an outside role's consumer group prefix (default: NAME.)")
    acls.add_argument(
        "--type", dest="job_types", action="append", default=[], help="a remote job type (repeatable)"
    )
    acls.add_argument("--apply", action="store_true", help="create them, as this command's Kafka principal")
    acls.add_argument("--json", action="store_true", help="print them as JSON")


def _monitor_parser(commands: argparse._SubParsersAction[_Parser]) -> None:
    """`monitor` and its actions, each with the API options."""
    monitor = commands.add_parser("monitor", help="watch pages: checks on a schedule, only changes announced")
    actions = monitor.add_subparsers(dest="action", required=True)
    add = _api_command(actions, "add", "watch a page (once per name and caller: the same again is no change)")
    add.add_argument("page", metavar="URL", help="the page to watch")
    add.add_argument("--name", required=True, help="unique among your monitors")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--every", type=_seconds, help="between checks: 10s at least (90s, 30m, 1h, 2d)")
    when.add_argument("--cron", help="a cron expression, e.g. '0 9 * * 1-5' (in --time-zone)")
    add.add_argument("--time-zone", default="UTC", help="IANA time zone of --cron and --window")
    add.add_argument("--jitter", type=_seconds, default=0, help="spread checks by up to this (e.g. 30s)")
    add.add_argument("--window", help="only between these local times, e.g. 09:00-18:00")
    add.add_argument(
        "--watch", action="append", default=[], help="a CSS selector whose text counts (repeatable)"
    )
    add.add_argument("--ignore", action="append", default=[], help="a CSS selector whose text never counts")
    add.add_argument(
        "--select", help="of a JSON document only what this JMESPath selects counts, e.g. 'items[0].price'"
    )
    add.add_argument(
        "--trigger",
        action="append",
        default=[],
        help="announce only when a changed line matches (RE2, repeatable)",
    )
    add.add_argument(
        "--drop", action="append", default=[], help="lines this matches never count (RE2, repeatable)"
    )
    add.add_argument("--insensitive", action="store_true", help="case and whitespace never count")
    add.add_argument(
        "--visual",
        type=float,
        metavar="SHARE",
        help="compare screenshots (rendered in Chromium): a change when more than this share of pixels "
        "changed, e.g. 0.02",
    )
    add.add_argument(
        "--product", action="store_true", help="compare the page's schema.org offer: price and stock, typed"
    )
    add.add_argument("--callback-url", help="each change is POSTed here, signed")
    add.add_argument("--type", dest="job_type", default="http.fetch", help="e.g. browser.render")
    add.add_argument("--unconditional", action="store_true", help="never ask with ETag / Last-Modified")
    add.add_argument("--caller", help="whose monitor it is (default: the token's principal, else cli)")
    _api_command(actions, "list", "your monitors (all of them, for viewers and above)").add_argument(
        "--caller", help="only this caller's"
    )
    for action, summary in (
        ("get", "show a monitor: its schedule, next check, counts"),
        ("pause", "no checks until resumed"),
        ("resume", "checks again from the next due time"),
        ("delete", "stop watching (the history stays)"),
        ("changes", "the changes a monitor found, newest first, with their diffs"),
        ("checks", "a monitor's checks, newest first"),
    ):
        parser = _api_command(actions, action, summary)
        parser.add_argument("monitor_id")
        if action in ("pause", "resume"):
            parser.add_argument("--reason", default="", help="recorded in its history")


def _api_command(
    commands: argparse._SubParsersAction[_Parser], name: str, summary: str
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(name, help=summary)
    parser.add_argument("--url", help="API base URL (default: SCRAPESTREAM_URL, else a running dev)")
    parser.add_argument("--token", help="bearer token (default: SCRAPESTREAM_TOKEN)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


def _check_submit(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> None:
    if (arguments.url is None) == (arguments.source is None):
        parser.error("submit: give a URL or --from FILE (one of them)")
    if arguments.source is not None and arguments.idempotency_key is not None:
        parser.error("submit: --idempotency-key names one job; with --from, give each line its own key")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return int(text)


def _after_now(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds from now above 0")
    return seconds


def _processes(text: str) -> int | str:
    if text == "auto":
        return text
    if not text.isdigit() or not 1 <= int(text) <= 256:
        raise argparse.ArgumentTypeError(f"{text!r} is neither auto nor a number of processes from 1 to 256")
    return int(text)


def _seconds(text: str) -> int:
    found = re.fullmatch(r"(\d{1,9})([smhd]?)", text.strip())
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 30s, 15m, 1h or 2d")
    return int(found[1]) * {"": 1, "s": 1, "m": 60, "h": 3_600, "d": 86_400}[found[2]]


def _viewport(text: str) -> tuple[int, int]:
    width, separator, height = text.lower().partition("x")
    if not separator or not width.isdigit() or not height.isdigit() or max(len(width), len(height)) > 9:
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT (each at most nine digits)")
    return int(width), int(height)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    arguments = parser.parse_args(argv)
    if arguments.command == "submit":
        _check_submit(parser, arguments)
    from schemas.errors import ScrapestreamError
    from streams.runtime.logs import configure

    configure(arguments.verbose)

    try:
        if arguments.command in KAFKA_COMMANDS:
            from streams.cli.kafka import run_kafka_command

            if not arguments.verbose:  # a client command says what a lost broker means, not the driver
                logging.getLogger("aiokafka").setLevel(logging.CRITICAL)

            return run_kafka_command(arguments)
        if arguments.command in API_COMMANDS:
            from streams.cli.api import run_api_command

            return run_api_command(arguments)
        from streams.cli.serve import serve

        return serve(arguments)
    except KeyboardInterrupt:
        sys.stderr.write("scrapestream: interrupted\n")
        return EXIT_INTERRUPTED
    except ScrapestreamError as exc:
        sys.stderr.write(f"scrapestream: {exc}\n")
        return EXIT_USAGE if _is_usage(exc) else EXIT_FAILED


def _is_usage(exc: Exception) -> bool:
    """A mistake in the settings or the command line, rather than a failure of what it asked for."""
    from streams.errors import UsageError

    return isinstance(exc, UsageError)


if __name__ == "__main__":
    sys.exit(main())
