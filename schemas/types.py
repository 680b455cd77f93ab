"""Field types shared by every record, normalised to what survives the Avro wire."""

import functools
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from types import UnionType
from typing import Annotated, Any, ClassVar, NewType, Union, get_args, get_origin, get_type_hints
from uuid import UUID

import msgspec

JobId = NewType("JobId", UUID)
LeaseId = NewType("LeaseId", UUID)
CommandId = NewType("CommandId", UUID)
EventId = NewType("EventId", UUID)

COST_QUANTUM = Decimal("0.000001")


@functools.lru_cache(maxsize=1 << 16)
def uuid_text(value: UUID) -> str:
    """`str(value)`, remembered: a job's id is written into keys and records many times over."""
    return str(value)


def to_utc_millis(value: datetime) -> datetime:
    """Truncate to whole milliseconds in UTC, as `timestamp-millis` does on the wire."""
    if value.tzinfo is UTC and value.microsecond % 1000 == 0:
        return value
    if value.tzinfo is None:
        raise TypeError(f"{value.isoformat()} has no time zone; instants are aware")
    utc = value.astimezone(UTC)
    return utc.replace(microsecond=utc.microsecond - utc.microsecond % 1000)


def to_cost_scale(value: Decimal) -> Decimal:
    """Round to the six decimal places of the Avro `decimal(18, 6)` cost fields."""
    return value.quantize(COST_QUANTUM, rounding=ROUND_HALF_EVEN)


_INSTANT = msgspec.Meta(tz=True, description="an instant in UTC at whole milliseconds")
_MONEY = msgspec.Meta(description="an amount at six decimal places")
Instant = Annotated[datetime, _INSTANT]
Money = Annotated[Decimal, _MONEY]


def _marked(kind: Any, marker: msgspec.Meta) -> bool:
    """Whether a field's type is `marker`'s, alone or with None."""
    if marker in getattr(kind, "__metadata__", ()):
        return True
    return get_origin(kind) in (Union, UnionType) and any(_marked(arg, marker) for arg in get_args(kind))


def _marked_items(kind: Any, marker: msgspec.Meta) -> bool:
    """Whether a field's type is a tuple of `marker`'s type."""
    return get_origin(kind) is tuple and _marked(get_args(kind)[0], marker)


class Record(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """Base of every contract record: an immutable plain value, built without validation.

    Values from outside are checked where they enter (the codec's decoders, the HTTP bodies);
    instants and costs are brought to what the wire keeps when a record is made, so a record in
    memory equals itself read back.
    """

    _instants: ClassVar[tuple[str, ...]] = ()
    _instant_tuples: ClassVar[tuple[str, ...]] = ()
    _amounts: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **options: Any) -> None:
        super().__init_subclass__(**options)
        hints = get_type_hints(cls, include_extras=True)
        cls._instants = tuple(name for name, kind in hints.items() if _marked(kind, _INSTANT))
        cls._instant_tuples = tuple(name for name, kind in hints.items() if _marked_items(kind, _INSTANT))
        cls._amounts = tuple(name for name, kind in hints.items() if _marked(kind, _MONEY))
        if any(_marked_items(kind, _MONEY) for kind in hints.values()):
            raise TypeError(f"{cls.__name__}: a tuple of amounts is not brought to scale")

    def __post_init__(self) -> None:
        for name in self._instants:
            value = getattr(self, name)
            if value is not None and not (value.tzinfo is UTC and value.microsecond % 1000 == 0):
                msgspec.structs.force_setattr(self, name, to_utc_millis(value))
        for name in self._instant_tuples:
            values = getattr(self, name)
            if any(not (value.tzinfo is UTC and value.microsecond % 1000 == 0) for value in values):
                msgspec.structs.force_setattr(self, name, tuple(to_utc_millis(value) for value in values))
        for name in self._amounts:
            value = getattr(self, name)
            if value.as_tuple().exponent != -6:
                msgspec.structs.force_setattr(self, name, to_cost_scale(value))
