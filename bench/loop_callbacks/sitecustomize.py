"""Counts the time each event-loop callback takes in every Python process started with this directory
on `PYTHONPATH` (`bench.idle --callbacks`); uvloop is kept out, as its callbacks cannot be wrapped.

Reads `LOOP_CALLBACKS_DIR` (where each process writes `callbacks.<pid>.json` once the window is over)
and `LOOP_CALLBACKS_FROM` and `LOOP_CALLBACKS_UNTIL` (the window, as Unix times).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

_OUT = os.environ.get("LOOP_CALLBACKS_DIR")
_FROM = float(os.environ.get("LOOP_CALLBACKS_FROM", "0"))
_UNTIL = float(os.environ.get("LOOP_CALLBACKS_UNTIL", "0"))
_spent: dict[str, list[float]] = {}  # a callback's name: its seconds and its calls
_unwrapped = asyncio.events.Handle._run


def _name_of(callback: Any) -> str:
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coroutine = owner.get_coro()
        frame = getattr(coroutine, "cr_frame", None)
        where = f" {Path(frame.f_code.co_filename).name}:{frame.f_lineno}" if frame is not None else ""
        return f"task {getattr(coroutine, '__qualname__', coroutine)}{where}"
    return str(getattr(callback, "__qualname__", type(callback).__name__))


def _write(pid: int) -> None:
    seconds = _UNTIL - _FROM
    table = [
        {"callback": name, "ms_a_second": round(spent * 1000 / seconds, 3), "calls_a_second": calls / seconds}
        for name, (spent, calls) in sorted(_spent.items(), key=lambda item: -item[1][0])
    ]
    Path(str(_OUT), f"callbacks.{pid}.json").write_text(json.dumps(table))


def _run(self: asyncio.events.Handle) -> None:
    now = time.time()
    if not _FROM <= now < _UNTIL:
        if now >= _UNTIL and _spent:
            _write(os.getpid())
            _spent.clear()
        _unwrapped(self)
        return
    name = _name_of(getattr(self, "_callback", None))
    started = time.perf_counter()
    try:
        _unwrapped(self)
    finally:
        spent = _spent.setdefault(name, [0.0, 0])
        spent[0] += time.perf_counter() - started
        spent[1] += 1


if _OUT:
    sys.modules["uvloop"] = None  # type: ignore[assignment]  # an import of it fails: the standard loop runs
    asyncio.events.Handle._run = _run  # type: ignore[method-assign]
