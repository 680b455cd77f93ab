"""The long fault runs kept out of the suite (pytest's `soak` marker), with their counts reported.

    .venv/bin/python -m bench.soak --report faults.jsonl

Runs every `soak` test of `tests/faults` on Apache Kafka (the ten-kill crash loop without
transactions, the contrast of docs/RELIABILITY.md's exactly-once table; the three-kill run, whose
every kill waits out Kafka's 45 s session timeout), one after another, and leaves each scenario's
counts as a JSON line in the report. Exits with pytest's code.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=Path("faults.jsonl"), help="the JSON-lines counts")
    arguments = parser.parse_args()
    command = [sys.executable, "-m", "pytest", "tests/faults", "-m", "soak", "-n", "0", "--broker", "kafka"]
    environment = os.environ | {"SCRAPESTREAM_FAULT_REPORT": str(arguments.report.resolve())}
    print(" ".join(command), file=sys.stderr)
    return subprocess.run(command, cwd=ROOT, env=environment, check=False).returncode  # noqa: S603


if __name__ == "__main__":
    sys.exit(main())
