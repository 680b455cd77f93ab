"""An attempt's record: an `AttemptRecorded` of its own, or held in the `JobSucceeded` it ended with.

A successful attempt is recorded in its job's `JobSucceeded` (`attempt`, schema version 24), one
event where two were written before; `attempt_record_of` gives the `AttemptRecorded` it stands for.
"""

from projections.lifecycle.emit import held_event
from schemas.events import AttemptRecorded, Event, JobSucceeded


def attempt_record_of(event: Event) -> AttemptRecorded | None:
    """The attempt record an event is or holds: itself, a success's attempt, or none."""
    if isinstance(event, AttemptRecorded):
        return event
    if isinstance(event, JobSucceeded) and event.attempt is not None:
        return held_event(event, AttemptRecorded, "attempt", attempt=event.attempt)
    return None
