"""Whether a writer schema from outside (a schema registry) is safe to decode with.

A decoder walks the writer's schema over bytes anyone may write. Three shapes make that walk
unbounded: a named type that contains itself (nesting as deep as the bytes say, until the
decoder's stack ends), an array whose items can take zero bytes (a block count of 2^50 in a few
bytes is 2^50 iterations), and sheer size or depth. A schema without them costs at most one step
per byte of the body. Names follow the Avro spec's namespace rules.
"""

from __future__ import annotations

from typing import Any

MAX_SCHEMA_CHARS = 64 * 1024  # the text a registry may hand back; ours are under 8 KiB
MAX_DEPTH = 32
MAX_NODES = 4096
PRIMITIVE_BYTES = {
    "null": 0,
    "boolean": 1,
    "int": 1,
    "long": 1,
    "float": 4,
    "double": 8,
    "bytes": 1,
    "string": 1,
}


class ShapeError(ValueError):
    """A writer schema a decoder could spend without bound on."""


def shape_problem(schema: Any) -> str | None:
    """Why `schema` (parsed JSON) is unsafe to decode with, or None when it is safe."""
    try:
        _Walk().least_bytes(schema, "", 0)
    except ShapeError as exc:
        return str(exc)
    except RecursionError:
        return "nested deeper than a decoder follows"
    return None


class _Walk:
    def __init__(self) -> None:
        self.defined: dict[str, int] = {}  # full name -> the fewest bytes a value of it takes
        self.open: set[str] = set()  # named types being defined: a reference to one is a cycle
        self.nodes = 0

    def least_bytes(self, node: Any, namespace: str, depth: int) -> int:
        """The fewest bytes a value of `node` takes, checking its shape on the way."""
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise ShapeError(f"more than {MAX_NODES} types")
        if depth > MAX_DEPTH:
            raise ShapeError(f"types nested deeper than {MAX_DEPTH}")
        if isinstance(node, str):
            return self._named_or_primitive(node, namespace)
        if isinstance(node, list):
            for branch in node:
                self.least_bytes(branch, namespace, depth + 1)
            return 1  # the branch index
        if not isinstance(node, dict):
            raise ShapeError(f"a type is a {type(node).__name__}")
        kind = node.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            return self._named(node, str(kind), namespace, depth)
        if kind in ("array", "map"):
            return self._container(node, str(kind), namespace, depth)
        return self.least_bytes(kind, namespace, depth + 1)

    def _container(self, node: dict[str, Any], kind: str, namespace: str, depth: int) -> int:
        least = self.least_bytes(node.get("items" if kind == "array" else "values"), namespace, depth + 1)
        if kind == "array" and least == 0:  # a map entry's key takes at least its length
            raise ShapeError("an array whose items can take zero bytes (a block count would cost no input)")
        return 1  # the block count

    def _named_or_primitive(self, name: str, namespace: str) -> int:
        if name in PRIMITIVE_BYTES:
            return PRIMITIVE_BYTES[name]
        full = _full_name(name, namespace)
        if full in self.open:
            raise ShapeError(f"{full[:80]} contains itself")
        if full not in self.defined:
            raise ShapeError(f"{full[:80]} is used before it is defined")
        return self.defined[full]

    def _named(self, node: dict[str, Any], kind: str, namespace: str, depth: int) -> int:
        name = node.get("name")
        if not isinstance(name, str):
            raise ShapeError(f"a {kind} without a name")
        declared = node.get("namespace")
        full = _full_name(name, declared if isinstance(declared, str) else namespace)
        if full in self.defined or full in self.open:
            raise ShapeError(f"{full[:80]} is defined twice")
        if kind == "enum":
            self.defined[full] = 1
            return 1
        if kind == "fixed":
            size = node.get("size")
            if not isinstance(size, int) or size < 0:
                raise ShapeError(f"fixed {full[:80]} has no size")
            self.defined[full] = size
            return size
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise ShapeError(f"record {full[:80]} has no fields")
        self.open.add(full)
        inner = full.rpartition(".")[0]
        total = sum(self.least_bytes(_field_type(field), inner, depth + 1) for field in fields)
        self.open.discard(full)
        self.defined[full] = total
        return total


def _field_type(field: Any) -> Any:
    if not isinstance(field, dict) or "type" not in field:
        raise ShapeError("a field without a type")
    return field["type"]


def _full_name(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"
