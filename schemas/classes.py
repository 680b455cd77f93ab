"""The record class of each current schema, by the schema's name."""

from __future__ import annotations

from schemas import commands, events, records, work
from schemas.registry import current_schemas
from schemas.types import Record


def _record_classes() -> dict[str, type[Record]]:
    classes: dict[str, type[Record]] = {}
    for module in (records, commands, events, work):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Record) and value.__name__ in current_schemas():
                classes[value.__name__] = value
    return classes


RECORD_CLASSES = _record_classes()
