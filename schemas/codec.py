"""Records to bytes and back: Avro single-object encoding, or the Confluent registry framing.

Single-object: `C3 01`, the writer schema's 8-byte little-endian CRC-64-AVRO fingerprint,
then the Avro body. Confluent: `00`, a 4-byte big-endian registry schema id, then the body.
A reader resolves old writer versions (from `avsc/history/`) to the current record.
"""

from __future__ import annotations

import io
import json
import struct
from collections import OrderedDict
from typing import Any, TypeVar, cast

import fastavro
import msgspec

from schemas import binary
from schemas.classes import RECORD_CLASSES
from schemas.errors import CodecError, TruncatedRecordError, UnknownSchemaError
from schemas.registry import KnownSchema, current_schemas, known_schema, writer_schemas
from schemas.types import Record
from schemas.writer_shape import MAX_SCHEMA_CHARS, ShapeError, shape_problem

SINGLE_OBJECT_MARKER = b"\xc3\x01"
CONFLUENT_MAGIC = b"\x00"
_SINGLE_OBJECT_HEADER = len(SINGLE_OBJECT_MARKER) + 8
_CONFLUENT_HEADER = len(CONFLUENT_MAGIC) + 4
R = TypeVar("R", bound=Record)
RECENT_KEPT = 4096
_PASSED_ON = frozenset(
    {
        "SubmitJob",
        "CancelJob",
        "ReportAttempt",
        "StartAttempt",
        "RenewLease",
        "CheckTimers",
        "ReportCallback",
        "DueWork",
        "CallbackDue",
    }
)
_RECENT: OrderedDict[bytes, Record] = OrderedDict()
_REGISTRY_WRITERS: dict[int, KnownSchema] = {}


def _write(record: Record, header: bytes) -> bytes:
    """`header` followed by the record's body, written by its generated encoder (`schemas.binary`)."""
    name = type(record).__name__
    if name not in current_schemas():
        raise CodecError(f"{name} has no Avro schema in scrapestream.v1")
    out = bytearray(header)
    try:
        binary.encoder(name)(record, out)
    except Exception as exc:  # an out-of-range value of any kind
        raise CodecError(f"cannot encode {name}: {type(exc).__name__}: {exc}") from exc
    return bytes(out)


def _read_body(writer: KnownSchema, body: bytes) -> Record:
    reader = current_schemas().get(writer.name)
    cls = RECORD_CLASSES.get(writer.name)
    if reader is None or cls is None:
        raise UnknownSchemaError(f"record {writer.name} is no longer known to this reader")
    if reader.fingerprint == writer.fingerprint:
        return _read_current(writer.name, body)
    buffer = io.BytesIO(body)
    try:
        data = cast(dict[str, Any], fastavro.schemaless_reader(buffer, writer.parsed, reader.parsed))
    except EOFError as exc:
        raise TruncatedRecordError(f"{writer.name} body ends early ({len(body)} bytes)") from exc
    except Exception as exc:  # e.g. OverflowError for a timestamp past year 9999: all are bad input
        raise CodecError(f"malformed {writer.name} body: {type(exc).__name__}: {exc}") from exc
    if buffer.tell() != len(body):
        raise CodecError(f"{len(body) - buffer.tell()} trailing bytes after a {writer.name} body")
    try:
        return msgspec.convert(data, cls)
    except Exception as exc:  # a field error, or a value its record cannot hold: all are bad input
        raise CodecError(f"invalid {writer.name}: {exc}") from exc


def _read_current(name: str, body: bytes) -> Record:
    """A body written with the current schema, by its generated decoder."""
    try:
        record, end = binary.decoder(name)(body, 0)
    except (IndexError, TruncatedRecordError) as exc:
        raise TruncatedRecordError(f"{name} body ends early ({len(body)} bytes)") from exc
    except Exception as exc:  # e.g. OverflowError for a timestamp past year 9999: all are bad input
        raise CodecError(f"malformed {name} body: {type(exc).__name__}: {exc}") from exc
    if end != len(body):
        raise CodecError(f"{len(body) - end} trailing bytes after a {name} body")
    return cast(Record, record)


def encode(record: Record) -> bytes:
    """Encode in Avro single-object encoding."""
    name = type(record).__name__
    schema = current_schemas().get(name)
    if schema is None:
        raise CodecError(f"{name} has no Avro schema in scrapestream.v1")
    data = _write(record, SINGLE_OBJECT_MARKER + schema.fingerprint)
    _remember(data, record)
    return data


def decode(data: bytes) -> Record:
    """Decode bytes written with any known version of any record: single-object encoded, or in the
    Confluent framing with a registry id learnt (`learn_registry_schema`)."""
    known = _RECENT.get(data)
    if known is not None:
        return known
    record = _decode(data)
    _remember(data, record)
    return record


def decode_or_none(data: bytes | None) -> Record | None:
    """`decode`, or None for a tombstone or bytes no scrapestream writer makes: for readers of topics
    anyone may write to, which skip such a record rather than stop."""
    if data is None:
        return None
    try:
        return decode(data)
    except CodecError:
        return None


def _remember(data: bytes, record: Record) -> None:
    """Records handed from one stage to the next inside a worker are decoded once (frozen, so shared)."""
    if type(record).__name__ in _PASSED_ON:
        _RECENT[data] = record
        if len(_RECENT) > RECENT_KEPT:
            _RECENT.popitem(last=False)


def _decode(data: bytes) -> Record:
    if data[:1] == CONFLUENT_MAGIC:
        return _decode_confluent(data)
    if len(data) < _SINGLE_OBJECT_HEADER:
        if not SINGLE_OBJECT_MARKER.startswith(data[:2]):
            raise CodecError("neither Avro single-object encoding (C3 01) nor Confluent framing (00)")
        raise TruncatedRecordError(f"{len(data)} bytes is shorter than the 10-byte header")
    if data[:2] != SINGLE_OBJECT_MARKER:
        raise CodecError(
            "neither Avro single-object encoding (C3 01) nor Confluent framing (00): "
            f"starts with {data[:2].hex()}"
        )
    fingerprint = data[2:_SINGLE_OBJECT_HEADER]
    writer = writer_schemas().get(fingerprint)
    if writer is None:
        raise UnknownSchemaError(
            f"unknown schema fingerprint {fingerprint.hex()}: a schema version this reader does not know "
            "(a newer release's, or no scrapestream.v1 schema at all)"
        )
    return _read_body(writer, data[_SINGLE_OBJECT_HEADER:])


def decode_as(data: bytes, *wanted: type[R]) -> R:
    """Decode, and refuse a record of any other type than `wanted` with a `CodecError`."""
    record = decode(data)
    if not isinstance(record, wanted):
        names = " or ".join(cls.__name__ for cls in wanted)
        raise CodecError(f"{type(record).__name__} is not a {names}")
    return record


def learn_registry_schema(schema_id: int, schema_text: str) -> KnownSchema:
    """Remember the writer schema a schema registry keeps under `schema_id` (its record's name must be
    one this reader knows, to resolve to, and its shape safe to decode with: `schemas.writer_shape`);
    Confluent-framed bytes naming that id then decode."""
    try:
        if len(schema_text) > MAX_SCHEMA_CHARS:
            raise ShapeError(f"{len(schema_text)} characters, more than a writer schema may have")
        standalone = json.loads(schema_text)
        problem = shape_problem(standalone)
        if problem is not None:  # before fastavro sees it: its walk over hostile bytes would not end
            raise ShapeError(problem)
        name = str(standalone["name"]).rsplit(".", 1)[-1]
        writer = known_schema(name, standalone)
    except Exception as exc:  # whatever a registry hands back that is no Avro record schema
        raise UnknownSchemaError(
            f"registry schema {schema_id} is no usable Avro record schema: {str(exc)[:200]}"
        ) from exc
    if name not in current_schemas():
        raise UnknownSchemaError(f"registry schema {schema_id} is a {name[:64]!r}, no scrapestream.v1 record")
    _REGISTRY_WRITERS[schema_id] = writer
    return writer


def registry_id(data: bytes) -> int | None:
    """The schema registry id Confluent-framed bytes name, or None for any other bytes."""
    if len(data) < _CONFLUENT_HEADER or data[:1] != CONFLUENT_MAGIC:
        return None
    return int(struct.unpack(">I", data[1:_CONFLUENT_HEADER])[0])


def known_registry_id(schema_id: int) -> bool:
    return schema_id in _REGISTRY_WRITERS


def as_confluent(data: bytes, schema_id: int) -> bytes:
    """Single-object-encoded bytes in the Confluent framing: the same Avro body behind another header."""
    if data[:2] != SINGLE_OBJECT_MARKER:
        raise CodecError(f"not Avro single-object encoding: starts with {data[:2].hex()}")
    return CONFLUENT_MAGIC + struct.pack(">I", schema_id) + data[_SINGLE_OBJECT_HEADER:]


def _decode_confluent(data: bytes) -> Record:
    if len(data) < _CONFLUENT_HEADER:
        raise TruncatedRecordError(f"{len(data)} bytes is shorter than the 5-byte Confluent header")
    (schema_id,) = struct.unpack(">I", data[1:_CONFLUENT_HEADER])
    writer = _REGISTRY_WRITERS.get(schema_id)
    if writer is None:
        raise UnknownSchemaError(f"unknown registry schema id {schema_id}")
    return _read_body(writer, data[_CONFLUENT_HEADER:])
