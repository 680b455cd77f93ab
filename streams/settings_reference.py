"""Prints the settings reference of docs/OPERATIONS.md: every setting, its type, default and meaning.

.venv/bin/python -m streams.settings_reference
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from streams.settings import Settings
from streams.settings_docs import SETTING_DOCS


def reference() -> str:
    lines = ["| variable | type | default | meaning |", "| --- | --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        variable = f"SCRAPESTREAM_{name.upper()}"
        kind = _type(field.annotation)
        default = field.default if field.default_factory is None else field.default_factory()  # type: ignore[call-arg]
        lines.append(f"| `{variable}` | {kind} | {_shown(default)} | {SETTING_DOCS[variable]} |")
    return "\n".join(lines) + "\n"


def _type(annotation: Any) -> str:
    text = str(annotation).replace("typing.", "").replace("pydantic.types.", "").replace("pathlib.", "")
    for module in ("ipaddress.", "schemas.enums.", "streams.settings.", "<class '", "'>"):
        text = text.replace(module, "")
    return f"`{text}`"


def _shown(value: Any) -> str:
    if value is None or value is PydanticUndefined:
        return "none"
    if isinstance(value, SecretStr):
        return "(secret)"
    return f"`{json.dumps(_plain(value), separators=(', ', ': '))}`"


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_defaults=True)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(_plain(key)): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, int | float | str | bool):
        return value
    return str(value)


if __name__ == "__main__":
    sys.stdout.write(reference())
