"""A JSON document's selected part as a monitor compares it: a JMESPath expression's result, one
`path = value` line per leaf in path order, each value canonical JSON, so a diff names what changed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError

from projections.monitors.unreadable import UnreadableContentError

MAX_SELECT_CHARS = 300
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def select_problem(expression: str) -> str | None:
    """Why a selection cannot be used, in words a caller can act on; None when it can."""
    if not expression.strip() or len(expression) > MAX_SELECT_CHARS:
        return f"select: a JMESPath expression has 1 to {MAX_SELECT_CHARS} characters"
    try:
        jmespath.compile(expression)
    except JMESPathError as exc:
        return f"select: not a JMESPath expression: {expression[:80]!r} ({str(exc).splitlines()[0][:120]})"
    return None


def selected_lines(text: str, expression: str) -> list[str]:
    """The leaves of what `expression` selects of the JSON document `text`, a line each."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UnreadableContentError(f"the content is not JSON: {str(exc)[:120]}") from exc
    try:
        return sorted(_leaves("@", jmespath.search(expression, document)))
    except RecursionError as exc:
        raise UnreadableContentError("the JSON document nests too deep to compare") from exc
    except JMESPathError as exc:  # e.g. a function given a value of the wrong type
        raise UnreadableContentError(f"the selection failed on this document: {str(exc)[:120]}") from exc


def _leaves(path: str, value: Any) -> Iterator[str]:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            step = key if _PLAIN_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)
            yield from _leaves(step if path == "@" else f"{path}.{step}", item)
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from _leaves(f"{path}[{index}]", item)
    else:
        yield f"{path} = {json.dumps(value, ensure_ascii=False, sort_keys=True)}"
