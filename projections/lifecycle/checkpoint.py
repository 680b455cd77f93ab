"""A monitor's state as one record, and back: what a store keeps in place of the events it folds, so
a monitor costs the same after ten checks and after a hundred thousand."""

from __future__ import annotations

from datetime import datetime

from projections.lifecycle.state import Monitor, PendingCallback
from schemas.work import CallbackInFlight, MonitorCheckpoint


def checkpoint_of(state: Monitor, folded_at: datetime) -> MonitorCheckpoint:
    return MonitorCheckpoint(
        created=state.created,
        spec=state.spec,
        sequence=state.sequence,
        folded_at=folded_at,
        next_due_at=state.next_due_at,
        paused=state.paused,
        deleted=state.deleted,
        last_due_at=state.last_due_at,
        pending=state.pending,
        fetched=state.fetched,
        fetched_status=state.fetched_status,
        fingerprint=state.fingerprint,
        artifact=state.artifact,
        gone=state.gone,
        checks=state.checks,
        changes=state.changes,
        missed=state.missed,
        last_change=state.last_change,
        last_change_webhook_id=state.last_change_webhook_id,
        callback_replays=state.callback_replays,
        callbacks=tuple(
            CallbackInFlight(
                due=pending.due,
                first_dispatched_at=pending.first_dispatched_at,
                attempt_number=pending.attempt_number,
                dispatched_at=pending.dispatched_at,
                next_attempt_at=pending.next_attempt_at,
                last_error=pending.last_error,
            )
            for pending in state.callbacks
        ),
        callbacks_finished=state.callbacks_finished,
        recent_command_ids=state.recent_command_ids,
        recent_command_at=state.recent_command_at,
    )


def monitor_of(checkpoint: MonitorCheckpoint) -> Monitor:
    return Monitor(
        created=checkpoint.created,
        spec=checkpoint.spec,
        sequence=checkpoint.sequence,
        next_due_at=checkpoint.next_due_at,
        paused=checkpoint.paused,
        deleted=checkpoint.deleted,
        last_due_at=checkpoint.last_due_at,
        pending=checkpoint.pending,
        fetched=checkpoint.fetched,
        fetched_status=checkpoint.fetched_status,
        fingerprint=checkpoint.fingerprint,
        artifact=checkpoint.artifact,
        gone=checkpoint.gone,
        checks=checkpoint.checks,
        changes=checkpoint.changes,
        missed=checkpoint.missed,
        last_change=checkpoint.last_change,
        last_change_webhook_id=checkpoint.last_change_webhook_id,
        callback_replays=checkpoint.callback_replays,
        callbacks=tuple(
            PendingCallback(
                due=held.due,
                first_dispatched_at=held.first_dispatched_at,
                attempt_number=held.attempt_number,
                dispatched_at=held.dispatched_at,
                next_attempt_at=held.next_attempt_at,
                last_error=held.last_error,
            )
            for held in checkpoint.callbacks
        ),
        callbacks_finished=checkpoint.callbacks_finished,
        recent_command_ids=checkpoint.recent_command_ids,
        recent_command_at=checkpoint.recent_command_at,
    )
