"""A monitor's state as one record, and back: what a store keeps in place of the events it folds, so
a monitor costs the same after ten checks and after a hundred thousand. The record's fields are the
state's, by name (a field the state gains and the record lacks fails at once)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import msgspec

from projections.lifecycle.state import Monitor, PendingCallback
from schemas.work import CallbackInFlight, MonitorCheckpoint


def checkpoint_of(state: Monitor, folded_at: datetime) -> MonitorCheckpoint:
    fields = _of_dataclass(state) | {
        "callbacks": tuple(CallbackInFlight(**_of_dataclass(held)) for held in state.callbacks)
    }
    return MonitorCheckpoint(folded_at=folded_at, **fields)


def monitor_of(checkpoint: MonitorCheckpoint) -> Monitor:
    fields = msgspec.structs.asdict(checkpoint)
    del fields["folded_at"]
    fields["callbacks"] = tuple(
        PendingCallback(**msgspec.structs.asdict(held)) for held in checkpoint.callbacks
    )
    return Monitor(**fields)


def _of_dataclass(value: Any) -> dict[str, Any]:
    """A dataclass's fields, one level deep (its records stay records)."""
    return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
