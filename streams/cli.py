"""The `scrapestream` command."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Sequence

from streams.broker.embedded import EmbeddedBroker
from streams.errors import BrokerError


async def _dev() -> None:
    async with EmbeddedBroker() as broker:
        sys.stdout.write(
            f"scrapestream dev: embedded broker (in-memory) serving Kafka on {broker.bootstrap}\n"
        )
        sys.stdout.write("Ctrl-C stops it; its log is gone when it stops.\n")
        sys.stdout.flush()
        await asyncio.Event().wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scrapestream", description="Event-sourced scrape jobs on Kafka.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("dev", help="run the embedded broker for local development")
    arguments = parser.parse_args(argv)
    try:
        if arguments.command == "dev":
            with contextlib.suppress(KeyboardInterrupt):
                asyncio.run(_dev())
    except BrokerError as exc:
        sys.stderr.write(f"scrapestream: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
