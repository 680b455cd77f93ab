"""Prints the settings reference of docs/OPERATIONS.md: every setting, its type, default and meaning.

.venv/bin/python -m streams.settings_reference
"""

from __future__ import annotations

import ipaddress
import json
import re
import sys
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from streams.settings import Settings
from streams.settings_docs import SETTING_DOCS

_PLAIN_TYPES: dict[Any, str] = {
    str: "text",
    int: "integer",
    float: "number",
    bool: "true or false",
    Path: "path",
    SecretStr: "text (a secret)",
    ipaddress.IPv4Network: "CIDR",
    ipaddress.IPv6Network: "CIDR",
}


def reference() -> str:
    lines = ["| variable | type | default | meaning |", "| --- | --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        variable = f"SCRAPESTREAM_{name.upper()}"
        kind = _type(field.annotation)
        default = field.default if field.default_factory is None else field.default_factory()  # type: ignore[call-arg]
        lines.append(f"| `{variable}` | {kind} | {_shown(default)} | {SETTING_DOCS[variable]} |")
    return "\n".join(lines) + "\n"


def _type(annotation: Any) -> str:
    """The type as a reader of the table thinks of it: `number`, `JSON object: name → route`."""
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type(arguments[0])
    if origin in (typing.Union, types.UnionType):
        present = [argument for argument in arguments if argument is not type(None)]
        shown = " or ".join(dict.fromkeys(_type(argument) for argument in present))
        return f"{shown}, or unset" if len(present) < len(arguments) else shown
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{value}`" for value in arguments)
    if origin is dict:
        return f"JSON object: {_key(arguments[0])} → {_type(arguments[1])}"
    if origin is tuple:
        if len(arguments) == 2 and arguments[1] is Ellipsis:
            item = _type(arguments[0])
            return f"JSON list of {item}s" if item.isalpha() or item == "CIDR" else f"JSON list of {item}"
        return "JSON list: " + ", ".join(_type(argument) for argument in arguments)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "one of " + ", ".join(f"`{member.value}`" for member in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _spaced(annotation.__name__.removesuffix("Settings"))
    return _PLAIN_TYPES.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _key(annotation: Any) -> str:
    """What a JSON object's keys name."""
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return f"{_spaced(annotation.__name__)} ({', '.join(f'`{member.value}`' for member in annotation)})"
    return "name"


def _spaced(name: str) -> str:
    """`HostOverride` as `host override`."""
    return re.sub(r"(?<!^)(?=[A-Z])", " ", name).lower()


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
