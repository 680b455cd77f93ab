"""Field types shared by every record, normalised to what survives the Avro wire."""

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Annotated, Any, NewType, TypeVar
from uuid import UUID

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict

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
    utc = value.astimezone(UTC)
    return utc.replace(microsecond=utc.microsecond - utc.microsecond % 1000)


def to_cost_scale(value: Decimal) -> Decimal:
    """Round to the six decimal places of the Avro `decimal(18, 6)` cost fields."""
    return value.quantize(COST_QUANTUM, rounding=ROUND_HALF_EVEN)


Instant = Annotated[AwareDatetime, AfterValidator(to_utc_millis)]
Money = Annotated[Decimal, AfterValidator(to_cost_scale)]


class Record(BaseModel):
    """Base of every contract record: immutable, no unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")


R = TypeVar("R", bound=Record)
_set_attribute = object.__setattr__


def build(cls: type[R], values: dict[str, Any]) -> R:
    """A record from a complete set of values already of its field types, without validating again.

    For values that cannot be otherwise: decoded from bytes of the record's own schema, or made
    by the lifecycle core from validated records. `BaseModel.model_construct` does the same, slower.
    """
    record = object.__new__(cls)
    _set_attribute(record, "__dict__", values)
    _set_attribute(record, "__pydantic_fields_set__", set(values))
    _set_attribute(record, "__pydantic_extra__", None)
    _set_attribute(record, "__pydantic_private__", None)
    return record


@functools.cache
def _defaults(cls: type[Record]) -> tuple[dict[str, Any], dict[str, Callable[[], Any]]]:
    static: dict[str, Any] = {}
    factories: dict[str, Callable[[], Any]] = {}
    for name, field in cls.model_fields.items():
        if field.default_factory is not None:
            factories[name] = field.default_factory  # type: ignore[assignment]
        elif not field.is_required():
            static[name] = field.default
    return static, factories


def build_with_defaults(cls: type[R], values: dict[str, Any]) -> R:
    """`build`, with the fields left out taking their declared defaults."""
    static, factories = _defaults(cls)
    missing = {name: make() for name, make in factories.items() if name not in values}
    return build(cls, {**static, **missing, **values})
