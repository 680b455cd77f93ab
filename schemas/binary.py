"""Avro binary encoding of the current schemas, as Python source generated once per record type.

fastavro interprets a schema on every call (20-35 µs for one event here); the generated functions
do only the work of their own fields, and decoding makes the plain record from its fields
(the bytes can only hold what the schema types allow, and every value is checked on the way).
Property tests keep the bytes identical to fastavro's. Records written with an older schema are
still resolved by fastavro (`schemas.codec`).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import struct
from collections.abc import Callable
from typing import Any
from uuid import UUID, SafeUUID

from schemas.errors import CodecError, TruncatedRecordError
from schemas.types import Record, uuid_text

Encoder = Callable[[Any, bytearray], None]
Decoder = Callable[[bytes, int], tuple[Any, int]]
EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
DOUBLE = struct.Struct("<d")


def write_long(out: bytearray, value: int) -> None:
    value = (value << 1) ^ (value >> 63)
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_long(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    pos += 1
    value = byte & 0x7F
    shift = 7
    while byte & 0x80:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if shift > 70:
            raise CodecError("a varint longer than a long")
    return (value >> 1) ^ -(value & 1), pos


def write_int(out: bytearray, value: int) -> None:
    if not -(2**31) <= value < 2**31:
        raise ValueError(f"{value} does not fit an Avro int")
    write_long(out, value)


def write_checked_long(out: bytearray, value: int) -> None:
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"{value} does not fit an Avro long")
    write_long(out, value)


_UNKNOWN_SAFETY = SafeUUID.unknown  # an enum member read through its class costs a descriptor call


@functools.lru_cache(maxsize=1 << 16)  # a job's id is read from each of its records
def uuid_of(text: str) -> UUID:
    """`UUID(text)`, and the same for any text: a form without braces or `urn:uuid:` (every writer
    here) is parsed as `UUID` parses it, without its other steps."""
    digits = text.replace("-", "")
    if len(digits) == 32:
        try:
            return uuid_from_int(int(digits, 16))
        except ValueError:
            pass  # UUID says what is wrong with it
    return UUID(text)


def uuid_from_int(value: int) -> UUID:
    """`UUID(int=value)` without its range check, for values made from 16 bytes."""
    identity = object.__new__(UUID)
    object.__setattr__(identity, "int", value)
    object.__setattr__(identity, "is_safe", _UNKNOWN_SAFETY)
    return identity


@functools.lru_cache(maxsize=1 << 16)  # a job's id is written into each of its records
def uuid_field(value: UUID) -> bytes:
    """A uuid field's bytes: the length and canonical text of a `UUID`, and of nothing else (a record
    is made without validating, so a caller's text in an id field is refused here)."""
    if not isinstance(value, UUID):
        raise TypeError(f"a uuid field holds a UUID, not {type(value).__name__}")
    return b"\x48" + uuid_text(value).encode()  # 36 characters


@functools.lru_cache(maxsize=8192)  # a job's records repeat its instants (deadline, decision times)
def timestamp_bytes(value: _dt.datetime) -> bytes:
    out = bytearray()
    write_long(out, millis_of(value))
    return bytes(out)


def millis_of(value: _dt.datetime) -> int:
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


@functools.lru_cache(maxsize=8192)  # one command's events share their instant
def from_millis(value: int) -> _dt.datetime:
    return EPOCH + _dt.timedelta(milliseconds=value)


@functools.lru_cache(maxsize=1024)  # most costs are zero
def decimal_bytes(value: decimal.Decimal, scale: int) -> bytes:
    """Two's-complement big-endian unscaled value, in as few bytes as fastavro writes."""
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int) or -exponent > scale:
        raise ValueError(f"{value} has more decimal places than the schema's {scale}")
    unscaled = int(value.scaleb(scale))
    return unscaled.to_bytes((abs(unscaled).bit_length() + 8) // 8, "big", signed=True)


def decimal_of(raw: bytes, scale: int) -> decimal.Decimal:
    return decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)


class _Generator:
    """Writes one encoder and one decoder per record type into a namespace."""

    def __init__(self, classes: dict[str, type[Record]]) -> None:
        self.classes = classes
        self.named: dict[str, Any] = {}
        self.namespace: dict[str, Any] = {
            "write_long": write_long,
            "write_int": write_int,
            "write_checked_long": write_checked_long,
            "read_long": read_long,
            "pack_double": DOUBLE.pack,
            "unpack_double": DOUBLE.unpack_from,
            "millis_of": millis_of,
            "timestamp_bytes": timestamp_bytes,
            "from_millis": from_millis,
            "decimal_bytes": decimal_bytes,
            "decimal_of": decimal_of,
            "uuid_of": uuid_of,
            "uuid_field": uuid_field,
            "CodecError": CodecError,
        }
        self.done: set[str] = set()

    def register(self, schema: Any) -> None:
        """Learn every named type a schema defines, so later references by name resolve."""
        if isinstance(schema, list):
            for branch in schema:
                self.register(branch)
        elif isinstance(schema, dict):
            kind = schema.get("type")
            if kind in ("record", "enum"):
                self.named[schema.get("namespace", "scrapestream.v1") + "." + schema["name"]] = schema
            for field in schema.get("fields", ()):
                self.register(field["type"])
            for part in ("items", "values"):
                self.register(schema.get(part))
            if isinstance(kind, dict | list):
                self.register(kind)

    def record(self, schema: dict[str, Any]) -> str:
        name = str(schema["name"])
        if name in self.done:
            return name
        self.done.add(name)
        self.namespace[f"cls_{name}"] = self.classes[name]
        encode = [f"def enc_{name}(record, out):"]
        decode = [f"def dec_{name}(data, pos):"]
        arguments = []
        for number, field in enumerate(schema["fields"]):
            variable = f"v{number}"
            encode.append(f"    {variable} = record.{field['name']}")
            encode += self.write(field["type"], variable, "    ")
            decode += self.read(field["type"], variable, "    ")
            arguments.append(f"{field['name']}={variable}")
        decode.append(f"    return cls_{name}({', '.join(arguments)}), pos")
        exec("\n".join(encode), self.namespace)  # noqa: S102 - source generated from our own schemas
        exec("\n".join(decode), self.namespace)  # noqa: S102
        return name

    def resolve(self, schema: Any) -> Any:
        if isinstance(schema, str) and schema in self.named:
            return self.named[schema]
        return schema

    @staticmethod
    def write_small(value: str, writer: str, indent: str) -> list[str]:
        """A long or int; the common small non-negative ones as one byte, inline."""
        return [
            f"{indent}n = {value}",
            f"{indent}if 0 <= n < 64:",
            f"{indent}    out.append(n << 1)",
            f"{indent}else:",
            f"{indent}    {writer}(out, n)",
        ]

    def write_raw(self, value: str, indent: str) -> list[str]:
        return [*self.write_small(f"len({value})", "write_long", indent), f"{indent}out += {value}"]

    def write(self, schema: Any, value: str, indent: str) -> list[str]:
        schema = self.resolve(schema)
        if isinstance(schema, list):
            null_first = schema[0] == "null"
            other = schema[1] if null_first else schema[0]
            present, absent = ("2", "0") if null_first else ("0", "2")  # zigzag of the branch index
            inner = self.write(other, value, indent + "    ")
            return [
                f"{indent}if {value} is None:",
                f"{indent}    out.append({absent})",
                f"{indent}else:",
                f"{indent}    out.append({present})",
                *inner,
            ]
        kind = schema["type"] if isinstance(schema, dict) else schema
        logical = schema.get("logicalType") if isinstance(schema, dict) else None
        if isinstance(kind, dict | list):
            return self.write(kind, value, indent)
        if logical == "uuid":
            return [f"{indent}out += uuid_field({value})"]
        if logical == "timestamp-millis":
            return [f"{indent}out += timestamp_bytes({value})"]
        if logical == "decimal":
            return [
                f"{indent}raw = decimal_bytes({value}, {schema['scale']})",
                *self.write_raw("raw", indent),
            ]
        if kind == "record":
            return [f"{indent}enc_{self.record(schema)}({value}, out)"]
        if kind == "enum":
            return self.write_enum(schema, value, indent)
        if kind == "array":
            item = f"{value}_item"
            return [
                f"{indent}if {value}:",
                f"{indent}    write_long(out, len({value}))",
                f"{indent}    for {item} in {value}:",
                *self.write(schema["items"], item, indent + "        "),
                f"{indent}out.append(0)",
            ]
        if kind == "map":
            key, item = f"{value}_key", f"{value}_value"
            return [
                f"{indent}if {value}:",
                f"{indent}    write_long(out, len({value}))",
                f"{indent}    for {key}, {item} in {value}.items():",
                f"{indent}        raw = {key}.encode()",
                *self.write_raw("raw", indent + "        "),
                *self.write(schema["values"], item, indent + "        "),
                f"{indent}out.append(0)",
            ]
        primitive = {
            "null": [],
            "boolean": [f"{indent}out.append(1 if {value} else 0)"],
            "int": self.write_small(value, "write_int", indent),
            "long": self.write_small(value, "write_checked_long", indent),
            "double": [f"{indent}out += pack_double({value})"],
            "string": [f"{indent}raw = {value}.encode()", *self.write_raw("raw", indent)],
            "bytes": self.write_raw(value, indent),
        }
        return primitive[kind]

    def write_enum(self, schema: dict[str, Any], value: str, indent: str) -> list[str]:
        table = f"enum_bytes_{schema['name']}"
        encoded: dict[str, bytes] = {}
        for index, symbol in enumerate(schema["symbols"]):
            varint = bytearray()
            write_long(varint, index)
            encoded[symbol] = bytes(varint)
        self.namespace[table] = encoded
        return [f"{indent}out += {table}[{value}]"]

    @staticmethod
    def read_small(target: str, indent: str) -> list[str]:
        """A long; the common one-byte ones inline."""
        return [
            f"{indent}byte = data[pos]",
            f"{indent}if byte < 0x80:",
            f"{indent}    {target} = (byte >> 1) ^ -(byte & 1)",
            f"{indent}    pos += 1",
            f"{indent}else:",
            f"{indent}    {target}, pos = read_long(data, pos)",
        ]

    def read_raw(self, target: str, indent: str) -> list[str]:
        return [
            *self.read_small("size", indent),
            f"{indent}end = pos + size",
            f"{indent}if size < 0 or end > len(data):",
            f"{indent}    raise TruncatedRecordError(f'a length of {{size}} runs past the body')",
            f"{indent}{target} = data[pos:end]",
            f"{indent}pos = end",
        ]

    def read(self, schema: Any, target: str, indent: str) -> list[str]:
        schema = self.resolve(schema)
        if isinstance(schema, list):
            null_first = schema[0] == "null"
            other = schema[1] if null_first else schema[0]
            present, absent = (2, 0) if null_first else (0, 2)  # zigzag of the branch index
            return [
                f"{indent}branch = data[pos]",
                f"{indent}pos += 1",
                f"{indent}if branch == {present}:",
                *self.read(other, target, indent + "    "),
                f"{indent}elif branch == {absent}:",
                f"{indent}    {target} = None",
                f"{indent}else:",
                f"{indent}    raise CodecError(f'union branch {{branch}} out of range')",
            ]
        kind = schema["type"] if isinstance(schema, dict) else schema
        logical = schema.get("logicalType") if isinstance(schema, dict) else None
        if isinstance(kind, dict | list):
            return self.read(kind, target, indent)
        if logical == "uuid":
            return [*self.read_raw(target, indent), f"{indent}{target} = uuid_of({target}.decode())"]
        if logical == "timestamp-millis":
            return [
                f"{indent}{target}, pos = read_long(data, pos)",
                f"{indent}{target} = from_millis({target})",
            ]
        if logical == "decimal":
            scale = schema["scale"]
            return [*self.read_raw(target, indent), f"{indent}{target} = decimal_of({target}, {scale})"]
        if kind == "record":
            return [f"{indent}{target}, pos = dec_{self.record(schema)}(data, pos)"]
        if kind == "enum":
            table = f"enum_symbols_{schema['name']}"
            enum_class = self.classes_enum(schema["name"])
            self.namespace[table] = tuple(enum_class(symbol) for symbol in schema["symbols"])
            return [
                *self.read_small(target, indent),
                f"{indent}if not 0 <= {target} < {len(schema['symbols'])}:",
                f"{indent}    raise CodecError(f'enum index {{{target}}} out of range')",
                f"{indent}{target} = {table}[{target}]",
            ]
        if kind in ("array", "map"):
            return self.read_blocks(schema, kind, target, indent)
        primitive = {
            "null": [f"{indent}{target} = None"],
            "boolean": [f"{indent}{target} = data[pos] != 0", f"{indent}pos += 1"],
            "int": self.read_small(target, indent),
            "long": self.read_small(target, indent),
            "double": [
                f"{indent}if pos + 8 > len(data):",
                f"{indent}    raise TruncatedRecordError('a double runs past the body')",
                f"{indent}({target},) = unpack_double(data, pos)",
                f"{indent}pos += 8",
            ],
            "string": [*self.read_raw(target, indent), f"{indent}{target} = {target}.decode()"],
            "bytes": self.read_raw(target, indent),
        }
        return primitive[kind]

    def read_blocks(self, schema: dict[str, Any], kind: str, target: str, indent: str) -> list[str]:
        item, key, count = f"{target}_item", f"{target}_key", f"{target}_count"
        start = "[]" if kind == "array" else "{}"
        body = (
            [
                *self.read(schema["items"], item, indent + "        "),
                f"{indent}        {target}.append({item})",
            ]
            if kind == "array"
            else [
                *self.read_raw(key, indent + "        "),
                *self.read(schema["values"], item, indent + "        "),
                f"{indent}        {target}[{key}.decode()] = {item}",
            ]
        )
        finish = [f"{indent}{target} = tuple({target})"] if kind == "array" else []
        return [
            f"{indent}{target} = {start}",
            f"{indent}while True:",
            f"{indent}    {count}, pos = read_long(data, pos)",
            f"{indent}    if {count} == 0:",
            f"{indent}        break",
            f"{indent}    if {count} < 0:",
            f"{indent}        {count} = -{count}",
            f"{indent}        _, pos = read_long(data, pos)",
            f"{indent}    if {count} > len(data) - pos:",
            f"{indent}        raise TruncatedRecordError(f'{{{count}}} items cannot fit the body')",
            f"{indent}    for _ in range({count}):",
            *body,
            *finish,
        ]

    def classes_enum(self, name: str) -> Any:
        from schemas import enums

        return getattr(enums, name)


@functools.cache
def _compiled() -> tuple[dict[str, Encoder], dict[str, Decoder]]:
    from schemas.classes import RECORD_CLASSES
    from schemas.registry import current_schemas

    generator = _Generator(RECORD_CLASSES)
    generator.namespace["TruncatedRecordError"] = TruncatedRecordError
    for schema in current_schemas().values():
        generator.register(schema.standalone)
    for schema in current_schemas().values():
        generator.record(schema.standalone)
    encoders = {name: generator.namespace[f"enc_{name}"] for name in current_schemas()}
    decoders = {name: generator.namespace[f"dec_{name}"] for name in current_schemas()}
    return encoders, decoders


def encoder(name: str) -> Encoder:
    return _compiled()[0][name]


def decoder(name: str) -> Decoder:
    return _compiled()[1][name]
