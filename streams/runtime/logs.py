"""Logging for the processes: one line per change, not one per retry.

When Kafka goes away every client retries on its own and aiokafka logs each failed connection;
`Repeats` lets the first record of a kind through and then at most one a window, saying how many
like it were held back, so a worker without its broker writes a line every half minute, not
a hundred a second. `/readyz` says the broker is unreachable meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from streams.runtime.trace_context import working

WINDOW_S = 30.0


class Repeats(logging.Filter):
    """Holds back records with the same logger and message template within `WINDOW_S`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._seen: dict[tuple[str, object], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        kind = (record.name, record.msg)
        now = self._clock()
        first, held = self._seen.get(kind, (None, 0))
        if first is None or now - first >= WINDOW_S:
            self._seen[kind] = (now, 0)
            if held:
                record.msg = f"{record.msg} ({held} more like it in the last {WINDOW_S:g} s)"
            return True
        self._seen[kind] = (first, held + 1)
        return False


class JobIds(logging.Filter):
    """Gives each record the job and trace its task works on (`trace_context.working_on`), if any."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.job = working()
        return True


def configure(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s%(job)s",
    )
    repeats, job_ids = Repeats(), JobIds()
    for handler in logging.getLogger().handlers:
        handler.addFilter(repeats)
        handler.addFilter(job_ids)
