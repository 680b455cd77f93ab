"""An attempt's record: an `AttemptRecorded` of its own, or held in the `JobSucceeded` it ended with.

A successful attempt is recorded in its job's `JobSucceeded` (`attempt`, schema version 24), one
event where two were written before; `recorded_attempt` gives the attempt an event records, and
`attempt_record_of` the `AttemptRecorded` it is or stands for.
"""

from projections.lifecycle.emit import held_event
from schemas.events import AttemptRecorded, Event, JobSucceeded
from schemas.records import Attempt


def recorded_attempt(event: Event) -> Attempt | None:
    """The attempt an event records: an `AttemptRecorded`'s, the one a success holds, or none."""
    return event.attempt if isinstance(event, AttemptRecorded | JobSucceeded) else None


def attempt_record_of(event: Event) -> AttemptRecorded | None:
    """The attempt record an event is or holds: itself, a success's attempt, or none."""
    if isinstance(event, AttemptRecorded):
        return event
    if isinstance(event, JobSucceeded) and event.attempt is not None:
        return held_event(event, AttemptRecorded, "attempt", attempt=event.attempt)
    return None
