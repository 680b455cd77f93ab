"""A writer schema from a registry is decoded with only when its shape bounds the decoder's walk by the
bytes it is given: every frozen version passes; self-containing types, arrays of zero-byte items,
and oversized or over-deep schemas are refused before fastavro sees them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.codec import learn_registry_schema
from schemas.errors import UnknownSchemaError
from schemas.registry import writer_schemas
from schemas.writer_shape import MAX_DEPTH, shape_problem


def submit_job(*fields: dict) -> dict:
    return {"type": "record", "name": "SubmitJob", "namespace": "scrapestream.v1", "fields": list(fields)}


def test_every_frozen_writer_version_passes():
    assert {schema.name: shape_problem(schema.standalone) for schema in writer_schemas().values()} == {
        schema.name: None for schema in writer_schemas().values()
    }


@pytest.mark.parametrize(
    ("field_type", "problem"),
    [
        (["null", "SubmitJob"], "contains itself"),
        ({"type": "array", "items": "SubmitJob"}, "contains itself"),
        ({"type": "map", "values": ["null", "scrapestream.v1.SubmitJob"]}, "contains itself"),
        ({"type": "array", "items": "null"}, "zero bytes"),
        ({"type": "array", "items": {"type": "record", "name": "Empty", "fields": []}}, "zero bytes"),
        ({"type": "array", "items": {"type": "fixed", "name": "Nothing", "size": 0}}, "zero bytes"),
        ({"type": "array", "items": {"type": "array", "items": {"type": "null"}}}, "zero bytes"),
        ("Unknown", "before it is defined"),
    ],
)
def test_a_shape_that_unbounds_the_decoder_is_refused(field_type, problem):
    found = shape_problem(submit_job({"name": "hostile", "type": field_type}))
    assert problem in (found or "")
    with pytest.raises(UnknownSchemaError, match=problem):
        learn_registry_schema(90, json.dumps(submit_job({"name": "hostile", "type": field_type})))


def test_a_record_reached_again_through_another_record_is_a_cycle():
    inner = {"type": "record", "name": "Inner", "fields": [{"name": "back", "type": ["null", "SubmitJob"]}]}
    assert "contains itself" in (shape_problem(submit_job({"name": "inner", "type": inner})) or "")


def test_too_deep_or_too_large_is_refused():
    deep: object = "string"
    for _ in range(MAX_DEPTH + 2):
        deep = {"type": "array", "items": deep}
    assert "deeper" in (shape_problem(submit_job({"name": "deep", "type": deep})) or "")
    wide = submit_job(*({"name": f"f{n}", "type": "string", "doc": "x" * 64} for n in range(2000)))
    with pytest.raises(UnknownSchemaError, match="characters"):
        learn_registry_schema(91, json.dumps(wide))


@given(
    st.recursive(
        st.sampled_from(["null", "int", "string", "boolean"]),
        lambda inner: st.one_of(
            st.builds(lambda items: {"type": "array", "items": items}, inner),
            st.builds(lambda values: {"type": "map", "values": values}, inner),
            st.lists(inner, min_size=1, max_size=3),
        ),
        max_leaves=8,
    )
)
def test_any_shape_is_judged_without_failing(field_type):
    found = shape_problem(submit_job({"name": "any", "type": field_type}))
    assert found is None or isinstance(found, str)
