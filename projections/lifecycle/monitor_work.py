"""What the shell must publish for monitors: each scheduled check's job, each ended check's result to
its monitor, content to read, and the changes found."""

from __future__ import annotations

from collections.abc import Sequence

from projections.lifecycle.callbacks import first_try
from projections.lifecycle.completion import webhook_id_of
from projections.lifecycle.identity import name_based
from projections.lifecycle.monitors import CHECK_DEADLINE, check_key, checked_monitor, monitor_change
from projections.lifecycle.state import Job, Monitor
from schemas.commands import RecordCheck, SubmitJob
from schemas.enums import CacheMode, JobStatus, RetentionClass
from schemas.events import ChangeDetected, CheckFetched, CheckScheduled, Event, JobCompleted, JobRejected
from schemas.work import ArtifactReference, CallbackDue, MonitorChange, ReadCheck


def monitor_consequences(
    state: Monitor,
    events: Sequence[Event],
    commands: list[SubmitJob | RecordCheck],
    reads: list[ReadCheck],
    changes: list[MonitorChange],
    callbacks: list[CallbackDue],
    references: list[ArtifactReference],
) -> None:
    for event in events:
        if isinstance(event, CheckScheduled):
            commands.append(check_submission(state, event))
        elif isinstance(event, CheckFetched):
            reads.append(
                ReadCheck(
                    monitor_id=state.monitor_id,
                    check_job_id=event.check_job_id,
                    artifact=event.artifact,
                    previous=state.artifact,
                    watch=state.spec.watch,
                    ignore=state.spec.ignore,
                    select=state.spec.select,
                    trigger=state.spec.trigger,
                    drop=state.spec.drop,
                    insensitive=state.spec.insensitive,
                    product=state.spec.product,
                    visual_threshold=state.spec.visual_threshold,
                )
            )
        elif isinstance(event, ChangeDetected):
            changes.append(monitor_change(state, event))
            difference = None if event.visual is None else event.visual.difference
            if difference is not None:  # kept while the change is: no check job's record points at it
                references.append(
                    ArtifactReference(
                        artifact_key=difference.key,
                        job_id=event.check_job_id,
                        expires_at=difference.expires_at,
                    )
                )
            callbacks.extend(first_try(state.callbacks, webhook_id_of(event)))


def check_submission(state: Monitor, scheduled: CheckScheduled) -> SubmitJob:
    """A check as a job: the monitor's options, asked conditionally unless it says otherwise."""
    spec, created = state.spec, state.created
    return SubmitJob(
        command_id=name_based(scheduled.check_job_id, "check"),
        caller_identity=state.owner,
        idempotency_key=check_key(state.monitor_id, scheduled.due_at),
        request=spec.request,
        job_type=spec.job_type,
        policy_class=spec.policy_class,
        cache_mode=CacheMode.REVALIDATE if spec.conditional else CacheMode.BYPASS,
        capture_mode=spec.capture_mode,
        retention_class=RetentionClass.CACHE_7D,
        transport_policy=spec.transport_policy,
        deadline_at=scheduled.occurred_at + CHECK_DEADLINE,
        labels=spec.labels,
        submitted_by=created.actor_id,
        submitter_role=created.actor_role,
        render=spec.render,
        credential=spec.credential,
    )


def check_result(job: Job, completion: JobCompleted) -> list[RecordCheck]:
    """A check job's end, for its monitor (which fences any job that is not its current check)."""
    monitor_id = checked_monitor(completion.idempotency_key)
    if monitor_id is None:
        return []
    last = job.attempts[-1] if job.attempts else None
    return [
        RecordCheck(
            monitor_id=monitor_id,
            command_id=name_based(job.job_id, "check-recorded"),
            check_job_id=job.job_id,
            status=completion.status,
            outcome=None if last is None else last.outcome,
            http_status=None if last is None else last.http_status,
            artifacts=completion.artifacts,
            failure_code=None if completion.failure is None else completion.failure.code,
        )
    ]


def check_rejected(rejected: JobRejected) -> list[RecordCheck]:
    """A check job refused at submission (its type switched off, its credential withdrawn) ends too."""
    monitor_id = checked_monitor(rejected.idempotency_key)
    if monitor_id is None:
        return []
    return [
        RecordCheck(
            monitor_id=monitor_id,
            command_id=name_based(rejected.job_id, "check-recorded"),
            check_job_id=rejected.job_id,
            status=JobStatus.REJECTED,
            failure_code=f"{rejected.reason}: {rejected.detail}"[:500],
        )
    ]
