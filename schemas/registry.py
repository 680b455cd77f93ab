"""The known Avro schemas: current ones from `avsc/`, frozen writer versions from `avsc/history/`.

Every schema is expanded to stand alone (named types inlined at first use), so its
CRC-64-AVRO fingerprint matches what any Avro implementation computes from the `.avsc` files.
Run `python -m schemas.registry --freeze` after a compatible schema change: it also writes
`bundle/scrapestream.v1.avsc`, every type in one file in dependency order, for other languages' tools.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, cast

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

NAMESPACE = "scrapestream.v1"
AvroSchema = dict[str, Any]


@dataclass(frozen=True)
class KnownSchema:
    """One schema version: the record it decodes to and its fingerprint."""

    name: str
    parsed: AvroSchema
    fingerprint: bytes
    standalone: AvroSchema


def _avsc_dir() -> Path:
    return Path(str(resources.files("schemas") / "avsc"))


def _load_definitions() -> dict[str, AvroSchema]:
    definitions: dict[str, AvroSchema] = {}
    for path in sorted(_avsc_dir().glob("*.avsc")):
        schema = json.loads(path.read_text())
        definitions[f"{schema['namespace']}.{schema['name']}"] = schema
    return definitions


def _expand(node: Any, definitions: dict[str, AvroSchema], seen: set[str]) -> Any:
    if isinstance(node, str):
        if node not in definitions or node in seen:
            return node
        seen.add(node)
        return _expand(definitions[node], definitions, seen)
    if isinstance(node, list):
        return [_expand(branch, definitions, seen) for branch in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind in ("record", "enum", "fixed"):
        seen.add(f"{node.get('namespace', NAMESPACE)}.{node['name']}")
    if kind == "record":
        fields = [{**field, "type": _expand(field["type"], definitions, seen)} for field in node["fields"]]
        return {**node, "fields": fields}
    if kind == "array":
        return {**node, "items": _expand(node["items"], definitions, seen)}
    if kind == "map":
        return {**node, "values": _expand(node["values"], definitions, seen)}
    if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind in definitions):
        return {**node, "type": _expand(kind, definitions, seen)}
    return node


def known_schema(name: str, standalone: AvroSchema) -> KnownSchema:
    parsed = cast(AvroSchema, fastavro.parse_schema(standalone))
    crc = fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO")
    return KnownSchema(name, parsed, bytes.fromhex(crc), standalone)


@cache
def current_schemas() -> dict[str, KnownSchema]:
    """Current schema of every record, by short name (e.g. `SubmitJob`)."""
    definitions = _load_definitions()
    return {
        schema["name"]: known_schema(schema["name"], _expand(schema, definitions, set()))
        for schema in definitions.values()
        if schema["type"] == "record"
    }


@cache
def writer_schemas() -> dict[bytes, KnownSchema]:
    """Every schema version ever frozen, plus the current ones, by fingerprint."""
    known = {schema.fingerprint: schema for schema in current_schemas().values()}
    for path in sorted((_avsc_dir() / "history").glob("*.avsc")):
        frozen = known_schema(path.name.split(".")[0], json.loads(path.read_text()))
        known.setdefault(frozen.fingerprint, frozen)
    return known


def frozen_fingerprints() -> set[bytes]:
    """Fingerprints stored in `avsc/history/`, read from the files' contents."""
    return {
        known_schema("", json.loads(path.read_text())).fingerprint
        for path in (_avsc_dir() / "history").glob("*.avsc")
    }


def _references(node: Any, definitions: dict[str, AvroSchema]) -> set[str]:
    """The names of `definitions` that `node` refers to."""
    if isinstance(node, str):
        return {node} if node in definitions else set()
    if isinstance(node, list):
        return set().union(*(_references(branch, definitions) for branch in node))
    if not isinstance(node, dict):
        return set()
    found: set[str] = set()
    for key in ("type", "items", "values"):
        if key in node and not (key == "type" and node[key] in ("record", "enum", "fixed")):
            found |= _references(node[key], definitions)
    for field in node.get("fields", ()):
        found |= _references(field["type"], definitions)
    return found


def bundle() -> list[AvroSchema]:
    """Every named type once, each after the types it refers to: one Avro union any parser loads."""
    definitions = _load_definitions()
    ordered: list[AvroSchema] = []
    placed: set[str] = set()

    def place(name: str) -> None:
        if name in placed:
            return
        placed.add(name)
        for needed in sorted(_references(definitions[name], definitions)):
            place(needed)
        ordered.append(definitions[name])

    for name in sorted(definitions):
        place(name)
    return ordered


def bundle_path() -> Path:
    return Path(str(resources.files("schemas") / "bundle" / f"{NAMESPACE}.avsc"))


def write_bundle() -> Path:
    path = bundle_path()
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(bundle(), indent=1) + "\n")
    return path


def freeze() -> list[Path]:
    """Write every current schema not yet in history; returns the files written."""
    history = _avsc_dir() / "history"
    history.mkdir(exist_ok=True)
    written = []
    for schema in current_schemas().values():
        path = history / f"{schema.name}.{schema.fingerprint.hex()}.avsc"
        if not path.exists():
            path.write_text(json.dumps(schema.standalone, indent=1) + "\n")
            written.append(path)
    return written


if __name__ == "__main__":
    if sys.argv[1:] != ["--freeze"]:
        sys.exit("usage: python -m schemas.registry --freeze")
    for written_path in freeze():
        sys.stdout.write(f"froze {written_path.name}\n")
    sys.stdout.write(f"wrote {write_bundle()}\n")
