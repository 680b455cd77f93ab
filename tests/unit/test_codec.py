import contextlib
import io
import json
import typing
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from uuid import UUID

import fastavro
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import enums
from schemas.binary import uuid_of
from schemas.classes import RECORD_CLASSES
from schemas.codec import as_confluent, decode, encode, learn_registry_schema
from schemas.errors import CodecError, TruncatedRecordError, UnknownSchemaError
from schemas.registry import bundle, bundle_path, current_schemas, known_schema
from tests.strategies import records

GOLDEN_FILES = sorted((Path(__file__).parent.parent / "golden").glob("records-v*.jsonl"))
ALL_RECORDS = st.sampled_from(sorted(RECORD_CLASSES)).flatmap(lambda name: records(RECORD_CLASSES[name]))


@settings(max_examples=400, deadline=None)  # the first example parses every schema
@given(ALL_RECORDS)
def test_every_record_round_trips_in_single_object_encoding(record):
    data = encode(record)
    assert data[:2] == b"\xc3\x01"
    assert decode(data) == record


REGISTRY_IDS = {name: 1000 + index for index, name in enumerate(sorted(current_schemas()))}


@given(ALL_RECORDS)
def test_every_record_round_trips_in_confluent_framing(record):
    name = type(record).__name__
    learn_registry_schema(REGISTRY_IDS[name], json.dumps(current_schemas()[name].standalone))
    data = as_confluent(encode(record), REGISTRY_IDS[name])
    assert data[:5] == b"\x00" + REGISTRY_IDS[name].to_bytes(4, "big")
    assert decode(data) == record


def test_a_registry_writer_that_lacks_a_defaulted_field_resolves_to_the_current_record():
    current = current_schemas()["SubmissionAnswer"].standalone
    older = {**current, "fields": [field for field in current["fields"] if field["name"] != "reason"]}
    learn_registry_schema(77, json.dumps(older))
    body = io.BytesIO()
    fastavro.schemaless_writer(
        body,
        fastavro.parse_schema(older),
        {"answer": "DEAD_INPUT", "source_partition": 1, "source_offset": 2, "answered_at": 0},
    )
    decoded = decode(b"\x00" + (77).to_bytes(4, "big") + body.getvalue())
    assert (decoded.source_offset, decoded.reason) == (2, None)


def test_a_registry_schema_of_no_known_record_is_refused():
    with pytest.raises(UnknownSchemaError, match=r"no scrapestream\.v1 record"):
        learn_registry_schema(78, json.dumps({"type": "record", "name": "Other", "fields": []}))
    with pytest.raises(UnknownSchemaError, match="no usable Avro record"):
        learn_registry_schema(79, "{not json")


def test_every_record_class_has_exactly_its_schema_fields():
    for name, cls in RECORD_CLASSES.items():
        schema = current_schemas()[name]
        fields = {field.name: field for field in msgspec.structs.fields(cls)}
        assert [field["name"] for field in schema.standalone["fields"]] == list(fields), name
        for avro in schema.parsed["fields"]:
            field = fields[avro["name"]]
            assert _python_type(avro["type"]) == _without_marks(field.type), (name, field.name)
            if "default" in avro and not field.required:
                assert _as_json(_default(field)) == avro["default"], (name, field.name)


_AVRO_TYPES = {
    "string": str,
    "long": int,
    "int": int,
    "double": float,
    "boolean": bool,
    "bytes": bytes,
    "null": type(None),
}
_LOGICAL_TYPES = {"uuid": UUID, "timestamp-millis": datetime, "decimal": Decimal}


def _python_type(avro: object) -> object:
    """The Python type a field of Avro type `avro` holds."""
    if isinstance(avro, list):
        return typing.Union[tuple(_python_type(branch) for branch in avro)]  # noqa: UP007
    if isinstance(avro, str):
        return _AVRO_TYPES.get(avro) or _named(avro)
    assert isinstance(avro, dict)
    if "logicalType" in avro:
        return _LOGICAL_TYPES[avro["logicalType"]]
    kind = avro["type"]
    if kind == "array":
        return tuple[_python_type(avro["items"]), ...]  # type: ignore[misc]
    if kind == "map":
        return dict[str, _python_type(avro["values"])]  # type: ignore[misc]
    if kind in ("record", "enum"):
        return _named(avro["name"])
    return _python_type(kind)


def _named(name: str) -> object:
    short = name.rsplit(".", 1)[-1]
    return RECORD_CLASSES.get(short) or getattr(enums, short)


def _without_marks(kind: object) -> object:
    """A field's type without its `Annotated` marks (instants, amounts)."""
    return typing.get_type_hints(type("_", (), {"__annotations__": {"field": kind}}))["field"]


def _as_json(value: object) -> object:
    return msgspec.json.decode(msgspec.json.encode(value))


def _default(field: msgspec.structs.FieldInfo) -> object:
    return field.default_factory() if field.default is msgspec.NODEFAULT else field.default


def _python_values(record: object, exclude: str = "") -> dict:  # type: ignore[type-arg]
    """A record as fastavro writes it: nested dicts, with its instants, ids and amounts as they are."""
    values = msgspec.to_builtins(record, builtin_types=(datetime, UUID, Decimal, bytes))
    return {name: value for name, value in values.items() if name != exclude}


def _golden_lines():
    for path in GOLDEN_FILES:
        yield from (json.loads(line) for line in path.read_text().splitlines())


def test_golden_records_encoded_by_earlier_releases_still_decode():
    golden_lines = list(_golden_lines())
    assert {golden["record"] for golden in golden_lines} == set(RECORD_CLASSES)
    for golden in golden_lines:
        decoded = decode(bytes.fromhex(golden["hex"]))
        assert type(decoded).__name__ == golden["record"]
        as_json = _as_json(decoded)
        written = _renamed(golden["record"], golden["json"])
        # Fields added since the record was written take their defaults.
        added = {name: value for name, value in as_json.items() if name not in written}
        defaults = _as_json({f.name: _default(f) for f in msgspec.structs.fields(decoded) if f.name in added})
        assert _as_written(as_json, written) == written
        assert added == defaults


def _renamed(record: str, written: dict) -> dict:  # type: ignore[type-arg]
    """`written` with each field renamed since (the current schema keeps its old name as an alias)."""
    fields = current_schemas()[record].standalone["fields"]
    new_names = {alias: field["name"] for field in fields for alias in field.get("aliases", ())}
    return {new_names.get(name, name): value for name, value in written.items()}


def _as_written(decoded, written):  # type: ignore[no-untyped-def]
    """`decoded` without the fields added (to it or to records nested in it) since `written` was encoded."""
    if isinstance(decoded, dict) and isinstance(written, dict):
        return {name: _as_written(decoded[name], value) for name, value in written.items() if name in decoded}
    if isinstance(decoded, list) and isinstance(written, list) and len(decoded) == len(written):
        return [_as_written(item, old) for item, old in zip(decoded, written, strict=True)]
    return decoded


def test_unknown_fingerprint_is_a_clear_error():
    with pytest.raises(UnknownSchemaError, match="unknown schema fingerprint 0102030405060708"):
        decode(b"\xc3\x01" + bytes(range(1, 9)) + b"\x00")


@given(ALL_RECORDS, st.data())
def test_truncated_bytes_are_a_clear_error(record, data):
    encoded = encode(record)
    cut = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))
    with pytest.raises(CodecError):
        decode(encoded[:cut])


def test_truncated_header_is_reported_as_truncation():
    with pytest.raises(TruncatedRecordError, match="shorter than the 10-byte header"):
        decode(b"\xc3\x01\x00")


def test_bytes_without_the_marker_are_refused():
    with pytest.raises(CodecError, match="neither Avro single-object encoding"):
        decode(b'{"caller_identity": "json is not avro"}')


def test_trailing_bytes_are_refused():
    record = next(iter(_golden_records()))
    with pytest.raises(CodecError, match="trailing bytes"):
        decode(encode(record) + b"\x00")


def test_unknown_confluent_id_is_a_clear_error():
    unused = 0x7FFF_FFF7  # an id no registry this process learnt from has given out
    with pytest.raises(UnknownSchemaError, match=f"unknown registry schema id {unused}"):
        decode(b"\x00" + unused.to_bytes(4, "big") + b"\x00")


def _golden_records():
    for golden in _golden_lines():
        yield decode(bytes.fromhex(golden["hex"]))


def test_every_current_schema_is_frozen_in_history():
    from schemas.registry import frozen_fingerprints

    missing = [s.name for s in current_schemas().values() if s.fingerprint not in frozen_fingerprints()]
    assert not missing, f"run `python -m schemas.registry --freeze` and commit: {missing}"


def test_a_reader_resolves_an_older_writer_that_lacked_a_defaulted_field():
    from schemas.codec import _read_body

    current = current_schemas()["JobCompleted"]
    older = dict(current.standalone)
    older["fields"] = [f for f in older["fields"] if f["name"] != "labels"]
    writer = known_schema("JobCompleted", older)
    completed = next(r for r in _golden_records() if type(r).__name__ == "JobCompleted")
    body = io.BytesIO()
    fastavro.schemaless_writer(body, writer.parsed, _python_values(completed, exclude="labels"))
    assert _read_body(writer, body.getvalue()) == msgspec.structs.replace(completed, labels={})


@settings(max_examples=600)
@given(ALL_RECORDS)
def test_the_generated_codec_writes_the_bytes_fastavro_writes_and_reads_them_back_the_same(record):
    import io

    import fastavro

    from schemas.codec import _read_body
    from schemas.registry import current_schemas

    schema = current_schemas()[type(record).__name__]
    reference = io.BytesIO()
    fastavro.schemaless_writer(reference, schema.parsed, _python_values(record))
    encoded = encode(record)
    assert encoded[10:] == reference.getvalue()
    data = fastavro.schemaless_reader(io.BytesIO(reference.getvalue()), schema.parsed, schema.parsed)
    validated = msgspec.convert(data, type(record))
    decoded = _read_body(schema, reference.getvalue())
    assert decoded == validated == record
    assert msgspec.to_builtins(decoded) == msgspec.to_builtins(validated)


@settings(max_examples=600)
@given(ALL_RECORDS, st.data())
def test_corrupted_bytes_decode_to_a_record_or_a_codec_error_and_nothing_else(record, data):
    encoded = bytearray(encode(record))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(10, max(10, len(encoded) - 1)))
        if position < len(encoded):
            encoded[position] = data.draw(st.integers(0, 255))
    with contextlib.suppress(CodecError):
        decode(bytes(encoded))


def test_the_committed_bundle_defines_every_type_once_after_the_types_it_refers_to():
    written = json.loads(bundle_path().read_text())
    assert written == bundle()
    names = [f"{schema['namespace']}.{schema['name']}" for schema in written]
    assert len(names) == len(set(names)) == len(list((bundle_path().parent.parent / "avsc").glob("*.avsc")))
    for position, schema in enumerate(written):
        named = json.dumps(schema)
        assert all(f'"{later}"' not in named for later in names[position + 1 :]), schema["name"]
    parsed = fastavro.parse_schema(written)
    assert {branch["name"] for branch in parsed} == set(names)


UUID_TEXTS = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda value: str(value).upper()),
    st.uuids().map(lambda value: f"{{{value}}}"),
    st.uuids().map(lambda value: f"urn:uuid:{value}"),
    st.text(alphabet="0123456789abcdefABCDEF-_+ {}urn:xg", max_size=40),
)


@given(UUID_TEXTS)
def test_a_uuid_field_is_read_as_uuid_reads_its_text(text):
    def parsed(parse):  # the UUID, or the kind of error
        try:
            return parse(text).int
        except ValueError:
            return ValueError

    assert parsed(uuid_of) == parsed(UUID)


def test_a_record_made_with_text_in_an_id_field_is_refused_rather_than_written():
    from schemas.commands import CancelJob
    from schemas.enums import ActorRole

    text_id = "4f6d67d8-27ff-6c9b-199e-b66f41f27ef3"
    cancel = CancelJob(job_id=text_id, actor_id="a", actor_role=ActorRole.ADMIN, reason="x")  # type: ignore[arg-type]
    with pytest.raises(CodecError, match="a uuid field holds a UUID, not str"):
        encode(cancel)
