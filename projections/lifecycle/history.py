"""A job as it was at a moment: the fold of its events up to then, when its whole history is kept."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from projections.lifecycle.evolve import replay
from projections.lifecycle.state import State
from schemas.events import Event


def events_until(events: Sequence[Event], at: datetime) -> list[Event]:
    """The events that had happened by `at` (a job's events are in sequence and time order)."""
    return [event for event in events if event.occurred_at <= at]


def state_as_of(events: Sequence[Event], at: datetime, base: State = None) -> State:
    """The state at `at`: `base` (a checkpoint's, when the events follow one) and the events by then."""
    return replay(events_until(events, at), base)


def checkpoint_refusal(since: datetime, at: datetime, now: datetime) -> str | None:
    """Why a monitor kept from a checkpoint at `since` on cannot be told as of `at`."""
    if at > now:
        return f"{at.isoformat()} is in the future (now is {now.isoformat()}): leave the time out for now"
    if at < since:
        return (
            f"this monitor's state is kept from {since.isoformat()} on (its earlier checks are in the log "
            f"and its lists); {at.isoformat()} is before it"
        )
    return None


def as_of_refusal(events: Sequence[Event], at: datetime, now: datetime, what: str = "job") -> str | None:
    """Why the job (or monitor) cannot be told as of `at`: a time to come, or one its kept history
    does not reach."""
    if at > now:
        return f"{at.isoformat()} is in the future (now is {now.isoformat()}): leave the time out for now"
    if not events:
        return f"no history of this {what} is kept (deleted or purged): nothing can be told as of any time"
    first = events[0]
    if first.sequence != 1:
        return (
            f"this {what}'s history is kept from its event #{first.sequence} "
            f"({first.occurred_at.isoformat()}) on; the earlier ones are only in a snapshot, so no time "
            "can be told from its events"
        )
    if at < first.occurred_at:
        return (
            f"this {what}'s history is kept from {first.occurred_at.isoformat()}, when it began; "
            f"{at.isoformat()} is before it"
        )
    return None
