"""A process without its broker logs each kind of failure once a window, saying how many it held back."""

import logging

from streams.runtime.logs import WINDOW_S, Repeats


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
