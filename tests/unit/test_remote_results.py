"""A remote executor's result is checked against its job type's declared schema, or is a typed failure."""

import contextlib
import io
from datetime import UTC, datetime

import fastavro
import pytest
from fastavro.schema import fingerprint, to_parsing_canonical_form
from hypothesis import given
from hypothesis import strategies as st

from streams.agents.remote import RemoteResults, ResultMismatchError
from streams.auth.principals import Principals, PrincipalsError

SCHEMA = {
    "type": "record",
    "name": "Summary",
    "fields": [{"name": "title", "type": "string"}, {"name": "words", "type": "int"}],
}


class Remote:
    name = "test.remote"
    label = "remote"
    remote = True
    result_schema = SCHEMA

    def outcome(self, result):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def encoded(schema: dict, record: dict) -> bytes:
    parsed = fastavro.parse_schema(schema)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, record)
    return (
        b"\xc3\x01"
        + bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))
        + out.getvalue()
    )


RESULTS = RemoteResults({"test.remote": Remote()}, artifacts=None, clock=lambda: datetime.now(UTC))  # type: ignore[arg-type]
GOOD = encoded(SCHEMA, {"title": "Hello", "words": 5})


def test_a_result_in_the_declared_schema_is_the_record_it_encodes():
    assert RESULTS.checked("test.remote", GOOD) == {"title": "Hello", "words": 5}


@pytest.mark.parametrize(
    "result",
    [
        None,
        GOOD + b"\x00",  # something after the record
        GOOD[:-1],  # cut short
        encoded(
            {"type": "record", "name": "Other", "fields": [{"name": "title", "type": "string"}]},
            {"title": "x"},
        ),
        GOOD[10:],  # no single-object header
    ],
)
def test_anything_else_is_a_result_mismatch(result):
    with pytest.raises(ResultMismatchError):
        RESULTS.checked("test.remote", result)


@given(st.binary(max_size=64))
def test_no_bytes_an_executor_sends_make_the_check_raise_anything_but_a_mismatch(tail):
    with contextlib.suppress(ResultMismatchError):
        RESULTS.checked("test.remote", GOOD[:10] + tail)


def test_a_principal_runs_only_the_job_types_it_is_given():
    principals = Principals.from_json(
        '{"principals": [{"name": "exec", "role": "SERVICE", "runs": ["a.b"]}]}', "t"
    )
    assert principals.named("exec").runs == frozenset({"a.b"})
    with pytest.raises(PrincipalsError, match="runs must be a list"):
        Principals.from_json('{"principals": [{"name": "exec", "role": "SERVICE", "runs": "a.b"}]}', "t")
