"""Where a running `scrapestream dev` says how to reach it: `.scrapestream/dev.json` in its directory.

Kept apart from `streams.dev` so the CLI's commands find a running dev without loading the worker.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DEV_DIR = Path(".scrapestream")
STATE_FILE = DEV_DIR / "dev.json"


def read_dev_state(directory: Path = DEV_DIR) -> dict[str, Any] | None:
    """The running dev instance's addresses, or None when none runs from this directory."""
    path = directory / STATE_FILE.name
    try:
        state: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(int(state["pid"]), 0)
    except (OSError, KeyError, ValueError):
        return None  # left behind by a run that did not stop cleanly
    return state
