"""A monitor's line patterns (`trigger`, `drop`): RE2 expressions, which match in time linear in the
line whatever the pattern (no backtracking), bounded in number, size and compiled memory."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import re2

MAX_PATTERNS = 20
MAX_PATTERN_CHARS = 200
MAX_PATTERN_MEMORY = 1 << 20


def _options(insensitive: bool) -> re2.Options:
    options = re2.Options()
    options.max_mem = MAX_PATTERN_MEMORY
    options.log_errors = False
    options.case_sensitive = not insensitive
    options.never_capture = True
    return options


class _Pattern(Protocol):
    def search(self, text: str) -> object: ...


@dataclass(frozen=True, slots=True)
class Patterns:
    """Compiled patterns; a line matches when any of them is found in it."""

    compiled: tuple[_Pattern, ...]

    def any_in(self, lines: Iterable[str]) -> bool:
        return any(pattern.search(line) for line in lines for pattern in self.compiled)

    def __bool__(self) -> bool:
        return bool(self.compiled)


def patterns_problem(field: str, patterns: Sequence[str]) -> str | None:
    """Why these patterns cannot be used, in words a caller can act on; None when they can."""
    if len(patterns) > MAX_PATTERNS:
        return f"{field}: at most {MAX_PATTERNS} patterns"
    for pattern in patterns:
        if not pattern or len(pattern) > MAX_PATTERN_CHARS:
            return f"{field}: a pattern has 1 to {MAX_PATTERN_CHARS} characters"
        try:
            re2.compile(pattern, _options(False))
        except re2.error as exc:
            reason = exc.args[0].decode("utf-8", "replace") if exc.args else "invalid"
            return f"{field}: not a pattern RE2 accepts: {pattern[:80]!r} ({reason[:120]})"
    return None


def compiled(patterns: Sequence[str], insensitive: bool = False) -> Patterns:
    """The patterns compiled; each must have passed `patterns_problem`."""
    return Patterns(tuple(re2.compile(pattern, _options(insensitive)) for pattern in patterns))
