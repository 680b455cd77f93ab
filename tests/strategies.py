"""Hypothesis strategies for every contract record, built from the records' own type hints."""

from __future__ import annotations

import types
import typing
from datetime import UTC, datetime
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID

from hypothesis import strategies as st

from schemas.types import Record

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INSTANTS = st.datetimes(
    min_value=datetime(1971, 1, 1),  # noqa: DTZ001 - hypothesis wants naive bounds with timezones=
    max_value=datetime(2200, 1, 1),  # noqa: DTZ001
    timezones=st.just(UTC),
)
MONEY = st.decimals(min_value=Decimal(0), max_value=Decimal("999999999"), places=6)
TEXT = st.text(max_size=20)
LONG_FIELDS = {
    "sequence",
    "bytes",
    "elapsed_ms",
    "size_bytes",
    "max_runtime_ms",
    "offset",
    "renew_interval_ms",
}


def _for_hint(hint: Any, name: str) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_for_hint(arg, name) for arg in typing.get_args(hint)))
    if origin is typing.Annotated:
        base = typing.get_args(hint)[0]
        return MONEY if base is Decimal else INSTANTS
    if origin is dict:
        return st.dictionaries(TEXT, TEXT, max_size=3)
    if origin is tuple:
        return st.lists(_for_hint(typing.get_args(hint)[0], name), max_size=2).map(tuple)
    if hint is type(None):
        return st.none()
    if isinstance(hint, type) and issubclass(hint, Record):
        return records(hint)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return st.sampled_from(list(hint))
    simple: dict[Any, st.SearchStrategy[Any]] = {
        str: TEXT,
        bytes: st.binary(max_size=20),
        bool: st.booleans(),
        UUID: st.uuids(),
        datetime: INSTANTS,
        Decimal: MONEY,
        float: st.floats(allow_nan=False),  # NaN is never equal to itself: a round trip could not show it
        int: st.integers(min_value=-(2**62), max_value=2**62) if name in LONG_FIELDS else INT32,
    }
    return simple[hint]


def records(cls: type[Record]) -> st.SearchStrategy[Record]:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {name: _for_hint(hints[name], name) for name in cls.__struct_fields__}
    return st.fixed_dictionaries(fields).map(lambda values: cls(**values))
