"""Field types shared by every record, normalised to what survives the Avro wire."""

from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Annotated, NewType
from uuid import UUID

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict

JobId = NewType("JobId", UUID)
LeaseId = NewType("LeaseId", UUID)
CommandId = NewType("CommandId", UUID)
EventId = NewType("EventId", UUID)

COST_QUANTUM = Decimal("0.000001")


def to_utc_millis(value: datetime) -> datetime:
    """Truncate to whole milliseconds in UTC, as `timestamp-millis` does on the wire."""
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
