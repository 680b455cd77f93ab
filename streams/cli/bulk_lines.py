"""A file of submissions: one URL a line, or JSON Lines with the fields `POST /jobs` takes.

Blank lines and lines starting with `#` are skipped. Each line's job is identified as a single
submission's is (its caller and idempotency key, by default a hash of its request and options),
so submitting the same file again creates no job twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from schemas.commands import SubmitJob
from streams.web.models import SubmitBody


@dataclass(frozen=True)
class FileSubmission:
    line: int
    url: str
    command: SubmitJob | None
    problem: str | None = None


def submissions_in(lines: Iterable[str], defaults: dict[str, Any]) -> Iterator[FileSubmission]:
    """Each line's submission, or what is wrong with it; `defaults` are the fields a line leaves out."""
    for number, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        given, problem = _fields(text)
        if given is None:
            yield FileSubmission(number, text[:200], None, problem)
            continue
        try:
            body = SubmitBody.model_validate(defaults | given)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            yield FileSubmission(number, str(given.get("url", ""))[:200], None, f"{where}: {first['msg']}")
            continue
        yield FileSubmission(number, body.url, body.command())


def _fields(text: str) -> tuple[dict[str, Any] | None, str | None]:
    if not text.startswith("{"):
        return {"url": text}, None
    try:
        given = json.loads(text)
    except ValueError as exc:
        return None, f"not JSON: {exc}"
    if not isinstance(given, dict):
        return None, "a JSON line must be an object with the submit fields"
    return given, None
