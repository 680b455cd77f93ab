"""A process without its broker logs each kind of failure once a window, saying how many it held back;
a line logged for a job names the job and its trace."""

import asyncio
import logging
from uuid import UUID

from streams.runtime.logs import WINDOW_S, JobIds, Repeats
from streams.runtime.trace_context import TraceContext, working_on


def record(message: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord("aiokafka", level, __file__, 1, message, None, None)


def test_a_repeated_failure_passes_once_a_window_with_the_count_it_held_back():
    now = [0.0]
    repeats = Repeats(lambda: now[0])
    passed = [repeats.filter(record("Unable connect to node %s")) for _ in range(100)]
    assert passed.count(True) == 1
    now[0] = WINDOW_S
    again = record("Unable connect to node %s")
    assert repeats.filter(again)
    assert "99 more like it" in again.msg


def test_other_kinds_and_lower_levels_pass():
    repeats = Repeats(lambda: 0.0)
    assert repeats.filter(record("one"))
    assert repeats.filter(record("another"))
    assert all(repeats.filter(record("detail", logging.INFO)) for _ in range(5))


def test_a_line_logged_while_a_task_works_on_a_job_names_the_job_and_its_trace():
    job_id = UUID("3d1f0a2b-8c4e-5d6f-9a1b-2c3d4e5f6a7b")
    formatter = logging.Formatter("%(message)s%(job)s")
    ids = JobIds()

    def line() -> str:
        record = logging.LogRecord("x", logging.WARNING, __file__, 1, "fetch failed", None, None)
        ids.filter(record)
        return formatter.format(record)

    async def attempt() -> str:
        working_on(job_id, TraceContext("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", True))
        return line()

    assert asyncio.run(attempt()) == f"fetch failed job={job_id} trace=4bf92f3577b34da6a3ce929d0e0e4736"
    assert line() == "fetch failed"  # outside the job's task: nothing to name
