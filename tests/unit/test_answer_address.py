"""The answer address intake puts on a forwarded command is read back only as intake writes it: a
record on the commands topic with other values in it is answered nowhere, never a failed batch."""

from __future__ import annotations

import json
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from streams.runtime.answers import ADDRESS_HEADER, AnswerAddress

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


def record_with(header: bytes) -> SimpleNamespace:
    return SimpleNamespace(headers=((ADDRESS_HEADER, header),))  # all of a record the address reads


def test_intakes_own_address_reads_back_whole():
    address = AnswerAddress(1, 2, b"key", "corr", None, "SubmitJob", "svc-a")
    assert AnswerAddress.of_command(record_with(address.header()[1])) == address


@given(st.dictionaries(st.sampled_from(["p", "o", "k", "c", "i", "t", "s"]), JSON_VALUES))
def test_any_other_header_is_an_address_of_text_fields_or_none(fields):
    found = AnswerAddress.of_command(record_with(json.dumps(fields).encode()))
    if found is not None:
        texts = (found.correlation_id, found.command_type, found.principal)
        assert all(value is None or isinstance(value, str) for value in texts)


def test_a_header_of_the_wrong_shape_addresses_nobody():
    for header in (b"[]", b'{"p": 0, "o": 1, "i": []}', b'{"p": true, "o": 1}', b'{"p": 0, "o": 1, "k": 5}'):
        assert AnswerAddress.of_command(record_with(header)) is None
