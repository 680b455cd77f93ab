"""Maintenance: purges what has outlived its retention, in bounded batches, on a schedule.

Each round takes at most `SCRAPESTREAM_MAINTENANCE_BATCH` of each kind, going on next round from
where it stopped:
- cache entries that expired: a tombstone on the compacted cache topic, by the worker that owns
  the entry's commands partition (every worker's table then drops it);
- artifacts nothing live points at, neither a job's artifact record nor a cache entry (the global
  table's view of `scrapestream.references` and `scrapestream.cache`): expired ones, and orphans
  last written more than `SCRAPESTREAM_ORPHAN_GRACE_HOURS` ago; each deletion is an
  `ArtifactPurged` record on the references topic. A shared store is kept by the owner of commands
  partition 0, a local one by its own worker's first process (its processes share the directory);
  none before the table has read both topics;
- histories of jobs finished more than `SCRAPESTREAM_HISTORY_RETENTION_DAYS` ago: a
  `DeleteJobHistory` command, decided by the lifecycle like an operator's (a job that can still
  run, or still owes a callback, is refused), so each purge is an event a replay agrees with;
- audit records written more than `SCRAPESTREAM_AUDIT_RETENTION_DAYS` ago (0, the default: kept):
  a `PurgeAuditRecords` command per history that holds some, an `AuditRecordsPurged` event the
  store folds by removing them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID, uuid5

from projections.artifacts import Pointers, removable_if_written_before
from projections.jobstore import JobStore
from projections.lifecycle.audit import CONFLICT
from projections.lifecycle.identity import audit_stream_id, job_target
from projections.lifecycle.mutations import retention_expired
from projections.lifecycle.state import Job
from schemas.commands import DeleteJobHistory, PurgeAuditRecords, RecordAudit
from schemas.enums import ActorRole, AuditAction, AuditOutcome
from schemas.events import AuditRecorded
from schemas.work import ArtifactPurged
from streams.artifacts.port import ArtifactStore
from streams.jobtypes import history_deletion_veto
from streams.readers.global_table import GlobalTable
from streams.runtime.decisions import Decided
from streams.runtime.periodic import every
from streams.runtime.publisher import Sink, outgoing, partition_of, tombstone
from streams.settings import Settings

log = logging.getLogger(__name__)
ACTOR = "scrapestream-maintenance"
PURGE_NAMESPACE = UUID("5b0c3f64-9f1e-5d0a-8a4c-3e2f7d1b6a90")
DECISION_TIMEOUT_S = 10.0

Decision = Callable[[UUID, float], Awaitable[Decided | None]]


@dataclass(frozen=True)
class Swept:
    """What one round purged (and how many purges the lifecycle refused)."""

    cache_entries: int = 0
    artifacts: int = 0
    histories: int = 0
    histories_refused: int = 0
    audit_histories: int = 0  # histories told to purge their old audit records


class Maintenance:
    def __init__(
        self,
        settings: Settings,
        store: JobStore,
        owned: Callable[[], list[int]],
        table: GlobalTable,
        artifacts: ArtifactStore,
        publisher: Sink,
        decision: Decision,
        clock: Callable[[], datetime],
        counters: Counter[str],
        job_types: Mapping[str, object] | None = None,
        first_process: bool = True,
    ) -> None:
        self._settings = settings
        self._first_process = first_process
        self._store = store
        self._owned = owned
        self._table = table
        self._artifacts = artifacts
        self._publisher = publisher
        self._decision = decision
        self._clock = clock
        self._counters = counters
        self._job_types = dict(job_types or {})  # a type may veto the deletion of its jobs' histories
        self._cache_after: str | None = None
        self._artifacts_after: str | None = None
        self._history_after: dict[int, bytes | None] = defaultdict(lambda: None)

    async def run(self) -> None:
        await every(self._settings.maintenance_interval_s, self._round, "maintenance")

    async def _round(self) -> Swept:
        return await self.run_once(self._clock())

    async def run_once(self, now: datetime) -> Swept:
        swept = Swept(
            await self._expire_cache_entries(now),
            await self._expire_artifacts(now),
            *await self._purge_histories(now),
            await self._purge_audit_records(now),
        )
        for name, count in vars(swept).items():
            self._counters[f"maintenance.{name}"] += count
        if any(vars(swept).values()):
            log.info(
                "maintenance purged %d cache entries, %d artifacts, %d job histories (%d refused),"
                " old audit records of %d histories",
                swept.cache_entries,
                swept.artifacts,
                swept.histories,
                swept.histories_refused,
                swept.audit_histories,
            )
        return swept

    async def _expire_cache_entries(self, now: datetime) -> int:
        owned = set(self._owned())
        partitions = self._settings.partitions
        expired, self._cache_after = self._table.expired(
            now, self._cache_after, self._settings.maintenance_batch
        )
        mine = [key for key in expired if partition_of(key.encode(), partitions) in owned]
        topic = self._settings.topic("cache")
        await self._publisher.send_all([tombstone(topic, key.encode()) for key in mine])
        return len(mine)

    async def _expire_artifacts(self, now: datetime) -> int:
        if self._artifacts.shared and 0 not in self._owned():
            return 0
        if not self._artifacts.shared and not self._first_process:
            return 0
        if not self._table.caught_up():
            log.info("artifacts are swept once the global table has read its topics")
            return 0
        batch = self._settings.maintenance_batch
        grace = timedelta(hours=self._settings.orphan_grace_hours)
        listed = await self._artifacts.listing(self._artifacts_after, batch)
        self._artifacts_after = listed[-1].key if len(listed) >= batch else None
        # The delete checks each object's last write again: one renewed since it was listed stays.
        removable: dict[tuple[datetime, str], list[str]] = defaultdict(list)
        for stored in listed:
            pointers = self._table.pointers(stored.key, now)
            cutoff = removable_if_written_before(stored.key, pointers, now, grace)
            if cutoff is not None and stored.written_at < cutoff:
                reason = "orphaned" if pointers is Pointers.NONE else "expired"
                removable[(cutoff, reason)].append(stored.key)
        purged = []
        for (written_before, reason), keys in removable.items():
            removed = await self._artifacts.delete(keys, written_before=written_before)
            purged += [_purged(key, written_before, reason, now) for key in removed]
        topic = self._settings.topic("references")
        await self._publisher.send_all([outgoing(topic, purge.artifact_key, purge) for purge in purged])
        return len(purged)

    async def _purge_histories(self, now: datetime) -> tuple[int, int]:
        days = self._settings.history_retention_days
        if days <= 0:
            return 0, 0
        cutoff = now - timedelta(days=days)
        expired: list[Job] = []
        for partition in self._owned():
            candidates, self._history_after[partition] = self._store.accepted_before(
                partition, cutoff, self._history_after[partition], self._settings.maintenance_batch
            )
            expired += [job for job in candidates if retention_expired(job, cutoff)]
        vetoed = await self._vetoed(expired, now)
        commands = [_purge(job.job_id, days) for job in expired if job.job_id not in vetoed]
        if not commands:
            return 0, len(vetoed)
        # Watched before they are sent, as tasks: a failed send cancels them, which stops the watching.
        decided = [
            asyncio.ensure_future(self._decision(_purge_id(command.job_id), DECISION_TIMEOUT_S))
            for command in commands
        ]
        topic = self._settings.topic("commands")
        try:
            await self._publisher.send_all([outgoing(topic, command.job_id, command) for command in commands])
        except BaseException:
            for waiting in decided:
                waiting.cancel()
            raise
        audits = await asyncio.gather(*decided)
        allowed = sum(
            1
            for audit in audits
            if isinstance(audit, AuditRecorded) and audit.outcome is AuditOutcome.ALLOWED
        )
        return allowed, len(commands) - allowed + len(vetoed)

    async def _vetoed(self, jobs: list[Job], now: datetime) -> set[UUID]:
        """The jobs whose type keeps their history (asked one by one), each refusal audited."""
        refusals = {
            job.job_id: (job.accepted.job_type, veto)
            for job in jobs
            if (veto := await history_deletion_veto(self._job_types.get(job.accepted.job_type), job.job_id))
        }
        stream = audit_stream_id(ACTOR, now)
        audits = [
            RecordAudit(
                command_id=uuid5(PURGE_NAMESPACE, f"veto/{job_id}/{now.date()}"),
                job_id=stream,
                actor_id=ACTOR,
                actor_role=ActorRole.ADMIN,
                action=AuditAction.JOB_HISTORY_DELETE,
                outcome=AuditOutcome.DENIED,
                detail=f"job type {job_type} keeps this history: {veto}",
                target=job_target(job_id),
                refusal=CONFLICT,
            )
            for job_id, (job_type, veto) in refusals.items()
        ]
        topic = self._settings.topic("commands")
        await self._publisher.send_all([outgoing(topic, stream, audit) for audit in audits])
        return set(refusals)

    async def _purge_audit_records(self, now: datetime) -> int:
        days = self._settings.audit_retention_days
        if days <= 0:
            return 0
        # Whole hours: the same command (and id) all hour, so a history is told once.
        before = (now - timedelta(days=days)).replace(minute=0, second=0, microsecond=0)
        histories = [
            job_id
            for partition in self._owned()
            for job_id in self._store.audited_before(partition, before, self._settings.maintenance_batch)
        ]
        topic = self._settings.topic("commands")
        await self._publisher.send_all(
            [outgoing(topic, job_id, _audit_purge(job_id, before, days)) for job_id in histories]
        )
        return len(histories)


def _audit_purge(job_id: UUID, before: datetime, days: float) -> PurgeAuditRecords:
    return PurgeAuditRecords(
        command_id=uuid5(PURGE_NAMESPACE, f"audit/{job_id}/{before.isoformat()}"),
        job_id=job_id,
        before=before,
        actor_id=ACTOR,
        actor_role=ActorRole.ADMIN,
        reason=f"audit retention: written more than {days:g} days ago",
    )


def _purged(key: str, written_before: datetime, reason: str, now: datetime) -> ArtifactPurged:
    return ArtifactPurged(
        artifact_key=key,
        written_before=written_before,
        reason=reason,
        purged_at=now,
    )


def _purge_id(job_id: UUID) -> UUID:
    """One command id per job: a purge sent twice is decided once."""
    return uuid5(PURGE_NAMESPACE, str(job_id))


def _purge(job_id: UUID, days: float) -> DeleteJobHistory:
    return DeleteJobHistory(
        command_id=_purge_id(job_id),
        job_id=job_id,
        actor_id=ACTOR,
        actor_role=ActorRole.ADMIN,
        reason=f"retention: finished more than {days:g} days ago",
    )
