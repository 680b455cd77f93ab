"""The records a decision's consequences become, each on its topic under its key: due work (on its
runner's due topic, keyed by host, with an upload URL for a remotely run type), completions, the
commands it causes, check reads, monitor changes, callbacks, cache entries and artifact references."""

from __future__ import annotations

import logging
from uuid import UUID

from projections.artifacts import reference_key
from projections.lifecycle.consequences import consequences_of
from projections.lifecycle.identity import host_of
from projections.lifecycle.monitors import monitor_id_for
from projections.lifecycle.policy import Policy
from projections.lifecycle.state import State, accepted_job
from projections.lifecycle.submission import runner_of, submission_identity
from schemas.commands import Command, CreateMonitor, ReportRemoteAttempt, SubmitJob
from schemas.enums import TransportPolicy
from schemas.events import Event
from schemas.work import DueWork
from streams.artifacts.uploads import Uploads
from streams.runtime.publisher import Outgoing, outgoing, tombstone
from streams.settings import Settings

log = logging.getLogger(__name__)


def target_job(command: Command | ReportRemoteAttempt) -> UUID:
    """The job (or monitor) a command is about: what its records are keyed by."""
    if isinstance(command, SubmitJob):
        return submission_identity(command)[0]
    if isinstance(command, CreateMonitor):
        return monitor_id_for(command.caller_identity, command.name)
    return command.job_id


class ConsequenceRecords:
    def __init__(self, settings: Settings, uploads: Uploads | None) -> None:
        self._settings = settings
        self._uploads = uploads
        self._due_topics: dict[tuple[str, TransportPolicy], str] = {}  # job types are known profiles only

    def of(self, state: State, events: list[Event], before: State, policy: Policy) -> list[Outgoing]:
        result = consequences_of(state, events, policy, before)
        job = accepted_job(state)
        topic = self._settings.topic
        at = events[-1].occurred_at
        return [
            *(
                outgoing(
                    self._due_topic(work.job_type, work.transport_policy),
                    host_of(work.request.url),
                    work,
                    at=at,
                )
                for work in map(self._handed_out, result.due)
            ),
            *(outgoing(topic("completions"), c.job_id, c, at=at) for c in result.completions),
            *(outgoing(topic("commands"), target_job(c), c, at=at) for c in result.commands),
            *(outgoing(topic("checks"), r.monitor_id, r, at=at) for r in result.reads),
            *(outgoing(topic("changes"), c.monitor_id, c, at=at) for c in result.changes),
            *(outgoing(topic("outbox"), c.job_id, c, at=at) for c in result.callbacks),
            *(outgoing(topic("cache"), e.request_hash, e, at=at) for e in result.cache_entries),
            *(
                outgoing(topic("references"), reference_key(r.artifact_key, r.job_id), r, at=at)
                for r in result.references
            ),
            *(tombstone(topic("references"), key) for key in result.released),
            *(
                outgoing(
                    self._due_topic(job.accepted.job_type, job.accepted.transport_policy),
                    host_of(job.accepted.request.url),
                    r,
                    at=at,
                )
                for r in result.revoked
                if job
            ),
        ]

    def _handed_out(self, work: DueWork) -> DueWork:
        """Due work of a remotely run type carries where its executor may upload a large result."""
        if self._uploads is None:
            return work
        try:
            return self._uploads.handed_out(work)
        except Exception as exc:  # a type's output key hook that fails: the work goes without an upload URL
            log.warning("job %s: no upload URL for its result: %s", work.job_id, exc)
            return work

    def _due_topic(self, job_type: str, transport_policy: TransportPolicy) -> str:
        key = (job_type, transport_policy)
        topic = self._due_topics.get(key)
        if topic is None:  # worked out once per type and policy, not per dispatched job
            topic = self._due_topics[key] = self._settings.due_topic(runner_of(job_type, transport_policy))
        return topic
