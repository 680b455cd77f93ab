"""What a command on the submit topic is answered: how it was decided, from what deciding it did.

A submission is created, reused or rejected by its first event; a mutation is applied (it
appended events) or refused (its actor's audit stream records why); a command whose id the
job has decided before is repeated, whatever it holds, and is answered with where the job stands.
A monitor's creation is created, reused (the caller has it already) or rejected (its spec or name
is unusable); its other commands are applied or refused, as a job's mutations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import get_args
from uuid import UUID

from projections.lifecycle.audit import INVALID
from projections.lifecycle.emit import command_id_of
from projections.lifecycle.mutations import shown_to
from projections.lifecycle.state import Monitor, State, accepted_job
from schemas.commands import Command, CreateMonitor, MutationCommand, RecordAudit
from schemas.enums import AnswerKind, JobStatus, RejectionReason
from schemas.events import Event, JobAccepted, JobRejected, MonitorCreated, SubmissionReused


@dataclass(frozen=True)
class Decision:
    """An answer's substance; where it goes and whom it names are the shell's."""

    answer: AnswerKind
    job_id: UUID
    job_status: JobStatus | None = None
    rejection: RejectionReason | None = None
    reason: str | None = None


def decision_of(
    job_id: UUID,
    command: Command,
    before: State,
    after: State,
    events: Sequence[Event],
    refused: RecordAudit | None,
) -> Decision:
    """How `command` on job `job_id` was decided, given the job's state before and after and the
    events it made (or the audit record of its refusal)."""
    if refused is not None:
        return _refused(job_id, command, before, refused)
    status = _status(after)
    command_id = command_id_of(command)
    for event in events:
        if event.command_id != command_id:
            continue
        if isinstance(event, JobAccepted | MonitorCreated):
            return Decision(AnswerKind.CREATED, job_id, status)
        if isinstance(event, SubmissionReused):
            return Decision(AnswerKind.REUSED, job_id, status)
        if isinstance(event, JobRejected):
            return Decision(AnswerKind.REJECTED, job_id, rejection=event.reason, reason=event.detail)
    if events:
        return Decision(AnswerKind.APPLIED, job_id, status)
    if before is not None and command_id in before.recent_command_ids:
        return Decision(AnswerKind.REPEATED, job_id, status, reason="this command_id was decided before")
    if isinstance(command, CreateMonitor) and isinstance(before, Monitor):
        return Decision(AnswerKind.REUSED, job_id, reason="the caller has this monitor already")
    return Decision(AnswerKind.APPLIED, job_id, status, reason="it changed nothing")


def _refused(job_id: UUID, command: Command, before: State, refused: RecordAudit) -> Decision:
    """Another service's job is refused as none (no status); an unusable monitor is rejected."""
    if isinstance(command, CreateMonitor) and refused.refusal == INVALID:
        return Decision(AnswerKind.REJECTED, job_id, reason=refused.detail)
    shown = isinstance(command, get_args(MutationCommand)) and shown_to(before, command)
    return Decision(AnswerKind.REFUSED, job_id, _status(before) if shown else None, reason=refused.detail)


def _status(state: State) -> JobStatus | None:
    job = accepted_job(state)
    return None if job is None else job.status
