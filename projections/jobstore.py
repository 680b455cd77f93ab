"""The lifecycle's local state: each job's events, its timers, and the log offset reached.

Keys (all ASCII):
  e/<job_id>/<sequence>           an event, single-object encoded
  t/<job_id>                      the job's current timer keys, if any (`d/…` and `l/…`, newline-separated)
  d/<partition>/<due_ms>/<job_id> the due index, ordered by time
  l/<partition>/<due_ms>/<job_id> the expiry of running leases, for the horizon sweep
  o/<partition>                   offset in scrapestream.events up to which this store is complete
  s/<partition>/<job_id>          a job changed since its last snapshot; the value is the offset it changed at
  p/<job_id>                      `<events offset>/<parts>` of the job's last snapshot written in parts
  q/<job_id>                      a history whose old audit records were purged (`AuditRecordsPurged`)
  v/<job_id>                      a monitor's checkpoint: its state after the events it replaces
  g/<job_id>/<sequence>           an audit record of a monitor's, kept when its event left for a checkpoint
  h/<job_id>/<ordinal, inverted>  a monitor's check older than its checkpoint, as listed (the newest few)
  y/<job_id>/<ordinal, inverted>  a change older than its checkpoint, as listed (the newest few)
and the read indexes of `projections.readindex`.
A commit writes all of them in one atomic batch, so state and offset never disagree. Deleting a
job's history removes its events but its audit records, and leaves a tombstone; purging audit
records removes those written before the purge's `before` and their index entries.
The fold keeps the first event of each job and sequence: a later duplicate is ignored and counted.
A monitor between checks is checkpointed once a check ends (or its events pile up): its events so
far leave the store for its state, so folding, reading and snapshotting it cost the same after ten
checks and after a hundred thousand; the log keeps them as long as its retention says.
"""

from __future__ import annotations

import itertools
import typing
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import cast
from urllib.parse import urlsplit
from uuid import UUID

from pydantic import BaseModel

from projections.lifecycle.attempts import recorded_attempt
from projections.lifecycle.audit import audit_of, listed_as_audit
from projections.lifecycle.checkpoint import checkpoint_of, monitor_of
from projections.lifecycle.consequences import lease_expiry, next_due_at
from projections.lifecycle.evolve import evolve, replay
from projections.lifecycle.monitors import checked_monitor
from projections.lifecycle.policy import Policy
from projections.lifecycle.state import Job, Monitor, State, Unaccepted, accepted_job
from projections.lifecycle.submission import rejection_owner
from projections.monitor_views import ChangeView, CheckView, change_views, check_views
from projections.readindex import (
    Page,
    artifact_ref_key,
    artifact_refs_prefix,
    audit_key,
    caller_key,
    count_key,
    dead_letter_key,
    index_prefix,
    job_key,
    monitor_keys,
    position,
    position_before,
    scan_page,
    tombstone_key,
)
from projections.storage.base import KeyValueStore, prefix_end
from schemas.codec import decode, decode_as, encode
from schemas.enums import JobStatus
from schemas.errors import CodecError
from schemas.events import (
    AuditRecorded,
    AuditRecordsPurged,
    CheckRecorded,
    Event,
    JobHistoryDeleted,
)
from schemas.records import Artifact
from schemas.types import uuid_text
from schemas.work import MonitorCheckpoint

EVENT_TYPES = typing.get_args(Event)
Listed = Job | Unaccepted  # a job, or a rejected submission (an `Unaccepted` with `rejected`)
CACHE_SIZE = 20_000
CHECKPOINT_AFTER = 32  # a monitor's events kept past its checkpoint, checks ended or not
LISTED_KEPT = 1_000  # a monitor's older checks (and changes) the store lists; the log keeps them all
ORDINAL_END = 10**12
SCAN_BUDGET = 5_000  # index entries one page may read


@dataclass(frozen=True)
class JobQuery:
    """Filters of a job listing; `dead_letters` lists dead-lettered jobs by completion time."""

    caller: str | None = None
    statuses: frozenset[JobStatus] | None = None
    job_type: str | None = None
    since: datetime | None = None
    dead_letters: bool = False
    id_prefix: str | None = None  # lower-case hex digits and dashes, as job ids are printed
    host: str | None = None  # lower case, as hosts are compared
    url_contains: str | None = None
    until: datetime | None = None
    checks: bool | None = None  # False: no monitor's check jobs; True: only them; None: either

    def matches(self, job: Listed) -> bool:
        if isinstance(job, Unaccepted):
            rejected = job.rejected
            return (
                rejected is not None
                and self._matches(
                    JobStatus.REJECTED, rejection_owner(rejected), rejected.job_type, rejected.url
                )
                and self._before_until(rejected.occurred_at)
                and self._checks_match(rejected.idempotency_key)
            )
        accepted = job.accepted
        return (
            self._matches(job.status, accepted.caller_identity, accepted.job_type, accepted.request.url)
            and self._before_until(accepted.occurred_at)
            and self._checks_match(accepted.idempotency_key)
        )

    def _checks_match(self, idempotency_key: str) -> bool:
        return self.checks is None or self.checks == (checked_monitor(idempotency_key) is not None)

    def _matches(self, status: JobStatus, caller: str, job_type: str, url: str) -> bool:
        if self.dead_letters and status is not JobStatus.DEAD_LETTER:
            return False
        if self.caller is not None and caller != self.caller:
            return False
        if self.statuses is not None and status not in self.statuses:
            return False
        if self.job_type is not None and job_type != self.job_type:
            return False
        if self.url_contains is not None and self.url_contains not in url:
            return False
        return self.host is None or (urlsplit(url).hostname or "") == self.host

    def _before_until(self, at: datetime) -> bool:
        return self.until is None or at <= self.until


_MAX_UUID = UUID(int=2**128 - 1)


def _events_prefix(job_id: UUID) -> bytes:
    return f"e/{uuid_text(job_id)}/".encode()


def _timer_key(kind: str, partition: int, due_at: datetime, job_id: UUID) -> bytes:
    due_ms = int(due_at.timestamp() * 1000)
    return f"{kind}/{partition:05d}/{max(due_ms, 0):015d}/{uuid_text(job_id)}".encode()


def _sequence_key(sequence: int) -> bytes:
    return f"{sequence:010d}".encode()


def _offset_key(partition: int) -> bytes:
    return f"o/{partition:05d}".encode()


def _audit_purged_key(job_id: UUID) -> bytes:
    """Kept once a history's audit records were purged: its id stays known with its first event gone."""
    return f"q/{uuid_text(job_id)}".encode()


def _parts_key(job_id: UUID) -> bytes:
    return f"p/{uuid_text(job_id)}".encode()


def _changed_key(partition: int, job_id: UUID) -> bytes:
    return f"s/{partition:05d}/{uuid_text(job_id)}".encode()


@dataclass(slots=True)
class _Folding:
    """One job's part of a commit: its state before, the events kept, and its state after them."""

    before: State
    last: int  # the sequence of the last event kept (or of `before`)
    prefix: bytes
    kept: list[Event] = field(default_factory=list)
    after: State = None


@dataclass(frozen=True)
class SnapshotCut:
    """Changed jobs of one partition as the store holds them at `events_offset`: each job's stored
    events, and the change marks to clear once they are written (unless changed again)."""

    partition: int
    events_offset: int
    jobs: dict[UUID, list[bytes]]
    marks: dict[bytes, bytes]
    complete: bool  # every changed job of the partition is in `jobs`
    purged: frozenset[UUID] = frozenset()  # jobs whose history is deleted: what is left is the marker


@dataclass
class Folded:
    """What one commit changed: the new state of each job touched, and the duplicates it ignored."""

    states: dict[UUID, State] = field(default_factory=dict)
    ignored: list[Event] = field(default_factory=list)


def owner_of(listed: Listed) -> str:
    """The caller a job, or a rejected submission, belongs to."""
    if isinstance(listed, Job):
        return listed.accepted.caller_identity
    return "" if listed.rejected is None else rejection_owner(listed.rejected)


class JobStore:
    """Jobs folded from their events, cached in memory, persisted in a `KeyValueStore`."""

    def __init__(self, store: KeyValueStore, policy: Policy) -> None:
        self._store = store
        self._policy = policy
        self._cache: OrderedDict[UUID, State] = OrderedDict()
        self.duplicates_ignored = 0

    def load(self, job_id: UUID) -> State:
        if job_id in self._cache:
            self._cache.move_to_end(job_id)
            return self._cache[job_id]
        # A point read of the first event answers the common case, a job never seen, without a scan.
        first = self._store.get(_events_prefix(job_id) + _sequence_key(1))
        base = None if first is not None else self.checkpoint(job_id)
        seen = (
            first is not None
            or base is not None
            or self._store.get(tombstone_key(job_id)) is not None
            or self._store.get(_audit_purged_key(job_id)) is not None
        )
        after = 0 if base is None else base.sequence
        state = (
            replay(self._events_after(job_id, after), None if base is None else monitor_of(base))
            if seen
            else None
        )
        self._remember(job_id, state)
        return state

    def checkpoint(self, job_id: UUID) -> MonitorCheckpoint | None:
        """The monitor's state in place of its events up to the checkpoint's, if it has one."""
        value = self._store.get(_checkpoint_key(job_id))
        return None if value is None else decode_as(value, MonitorCheckpoint)

    def older_checks(self, monitor_id: UUID) -> Iterator[CheckView]:
        """The monitor's checks its checkpoint replaced, newest first."""
        return (CheckView.model_validate_json(value) for value in self._older("h", monitor_id))

    def older_changes(self, monitor_id: UUID) -> Iterator[ChangeView]:
        """The changes its checkpoint replaced, newest first."""
        return (ChangeView.model_validate_json(value) for value in self._older("y", monitor_id))

    def _older(self, kind: str, monitor_id: UUID) -> Iterator[bytes]:
        prefix = f"{kind}/{uuid_text(monitor_id)}/".encode()
        return (value for _, value in self._store.scan(prefix, prefix + b"\xff"))

    def load_job(self, job_id: UUID) -> Job | None:
        return accepted_job(self.load(job_id))

    def load_listed(self, job_id: UUID) -> Listed | None:
        """The job, or the rejected submission under this id; None for anything else."""
        state = self.load(job_id)
        if isinstance(state, Job) or (isinstance(state, Unaccepted) and state.rejected is not None):
            return state
        return None

    def events_of(self, job_id: UUID) -> list[Event]:
        """The job's stored events: a checkpointed monitor's since its checkpoint."""
        checkpoint = self.checkpoint(job_id)
        return self._events_after(job_id, 0 if checkpoint is None else checkpoint.sequence)

    def _events_after(self, job_id: UUID, sequence: int) -> list[Event]:
        return [decode_event(value) for _, value in self._stored_after(job_id, sequence)]

    def _stored_after(self, job_id: UUID, sequence: int) -> list[tuple[bytes, bytes]]:
        """Stored events past `sequence`, read from there: not through what a checkpoint deleted."""
        prefix = _events_prefix(job_id)
        return list(self._store.scan(prefix + _sequence_key(sequence + 1), prefix + b"\xff"))

    def events_offset(self, partition: int) -> int:
        value = self._store.get(_offset_key(partition))
        return 0 if value is None else int(value)

    def commit(
        self,
        partition: int,
        events: Sequence[Event],
        next_offset: int | None,
        encoded: Sequence[bytes] | None = None,
        folded_by_caller: Mapping[UUID, State] | None = None,
    ) -> Folded:
        """Fold and persist `events` (appended to the log of `partition`), with the new offset.

        `encoded` are the events' bytes as appended to the log, and `folded_by_caller` the states
        the caller already reached with them, when it has them (the fold is not done twice).
        """
        changes: dict[bytes, bytes | None] = {}
        folded = Folded()
        jobs: dict[UUID, _Folding] = {}
        for index, event in enumerate(events):
            job = jobs.get(event.job_id)
            if job is None:
                before = self.load(event.job_id)
                job = jobs[event.job_id] = _Folding(before, _sequence(before), _events_prefix(event.job_id))
            if event.sequence != job.last + 1:
                folded.ignored.append(event)  # a duplicate (or a gap): the first event of a sequence wins
                continue
            job.kept.append(event)
            job.last = event.sequence
            value = encode(event) if encoded is None else encoded[index]
            changes[job.prefix + _sequence_key(event.sequence)] = value
        for job_id, job in jobs.items():
            if not job.kept:
                continue
            known = None if folded_by_caller is None else folded_by_caller.get(job_id)
            ok = known is not None and known.sequence == job.last and not folded.ignored
            folded.states[job_id] = job.after = known if ok else replay(job.kept, job.before)
        counts: Counter[bytes] = Counter()
        changed_at = str(next_offset).encode() if next_offset is not None else b""
        for job_id, job in jobs.items():
            if not job.kept:
                continue
            self._index(partition, job_id, job.after, changes)
            self._index_reads(partition, job.before, job.after, job.kept, changes, counts)
            changes[_changed_key(partition, job_id)] = changed_at
            self._checkpoint(partition, job, changes)
        self._count(counts, changes)
        if next_offset is not None:
            changes[_offset_key(partition)] = str(next_offset).encode()
        self._store.write(changes)
        for job_id, state in folded.states.items():
            self._remember(job_id, state)
        self.duplicates_ignored += len(folded.ignored)
        return folded

    def has_offset(self, partition: int) -> bool:
        """Whether this store ever folded `partition` (else it starts from a snapshot, or the log's start)."""
        return self._store.get(_offset_key(partition)) is not None

    def snapshot_cut(self, partition: int, limit: int) -> SnapshotCut:
        """Up to `limit` jobs of `partition` changed since their last snapshot, as of the stored offset."""
        prefix = f"s/{partition:05d}/".encode()
        marks: dict[bytes, bytes] = {}
        jobs: dict[UUID, list[bytes]] = {}
        complete = True
        for key, value in self._store.scan(prefix, prefix + b"\xff"):
            if len(jobs) >= limit:
                complete = False
                break
            job_id = UUID(key[len(prefix) :].decode())
            checkpoint = self.checkpoint(job_id)
            after = 0 if checkpoint is None else checkpoint.sequence
            jobs[job_id] = [
                *([] if checkpoint is None else [encode(checkpoint)]),
                *(audit for _, audit in ([] if checkpoint is None else self._kept_audits(job_id))),
                *(stored for _, stored in self._stored_after(job_id, after)),
            ]
            marks[key] = value
        purged = frozenset(job_id for job_id in jobs if self.history_deleted(job_id))
        return SnapshotCut(partition, self.events_offset(partition), jobs, marks, complete, purged)

    def history_deleted(self, job_id: UUID) -> bool:
        """Whether the job's history was deleted and no job has been accepted under its id since."""
        return self._store.get(tombstone_key(job_id)) is not None and not isinstance(self.load(job_id), Job)

    def snapshotted(self, cut: SnapshotCut, parts: Mapping[UUID, int]) -> None:
        """Clears the change marks of a written cut, except for jobs that changed again since, and
        keeps where each job written in `parts` (more than one) has them."""
        changes: dict[bytes, bytes | None] = {
            key: None for key, value in cut.marks.items() if self._store.get(key) == value
        }
        for job_id, count in parts.items():
            changes[_parts_key(job_id)] = f"{cut.events_offset}/{count}".encode() if count > 1 else None
        self._store.write(changes)

    def snapshot_parts(self, job_id: UUID) -> tuple[int, int] | None:
        """The events offset and part count of the job's last snapshot written in parts, if any."""
        value = self._store.get(_parts_key(job_id))
        if value is None:
            return None
        offset, count = value.decode().split("/")
        return int(offset), int(count)

    def restore(self, partition: int, snapshots: Mapping[UUID, Sequence[bytes]], events_offset: int) -> None:
        """Fill an empty partition from snapshots (each job's stored events, after a monitor's
        checkpoint), complete to `events_offset`."""
        changes: dict[bytes, bytes | None] = {}
        counts: Counter[bytes] = Counter()
        for job_id, encoded in snapshots.items():
            base, encoded = _checkpointed(encoded)
            if base is not None:
                changes[_checkpoint_key(job_id)] = encode(base)
                encoded = self._restore_kept_audits(partition, job_id, base, encoded, changes)
            events = [decode_event(value) for value in encoded]
            for event, value in zip(events, encoded, strict=True):
                changes[_events_prefix(job_id) + _sequence_key(event.sequence)] = value
            state = replay(events, None if base is None else monitor_of(base))
            self._index(partition, job_id, state, changes)
            self._index_reads(partition, None, state, events, changes, counts)
            if any(isinstance(event, JobHistoryDeleted) for event in events):
                changes[tombstone_key(job_id)] = b""
            if any(isinstance(event, AuditRecordsPurged) for event in events):
                changes[_audit_purged_key(job_id)] = b""
            self._remember(job_id, state)
        self._count(counts, changes)
        changes[_offset_key(partition)] = str(events_offset).encode()
        self._store.write(changes)

    def _restore_kept_audits(
        self,
        partition: int,
        monitor_id: UUID,
        base: MonitorCheckpoint,
        encoded: Sequence[bytes],
        changes: dict[bytes, bytes | None],
    ) -> Sequence[bytes]:
        """A snapshot's audit records from before its checkpoint, kept and listed again; the events after."""
        after: list[bytes] = []
        for value in encoded:
            event = decode_event(value)
            if event.sequence > base.sequence or not isinstance(event, AuditRecorded):
                after.append(value)
                continue
            kept_at = b"g/" + (_events_prefix(monitor_id) + _sequence_key(event.sequence))[2:]
            changes[kept_at] = value
            changes[audit_key(partition, event.occurred_at, event.audit_id)] = kept_at
        return after

    def _index(self, partition: int, job_id: UUID, state: State, changes: dict[bytes, bytes | None]) -> None:
        pointer = f"t/{uuid_text(job_id)}".encode()
        previous = self._store.get(pointer)
        due_at, lease_at = next_due_at(state, self._policy), lease_expiry(state)
        current = [
            _timer_key(kind, partition, at, job_id)
            for kind, at in (("d", due_at), ("l", lease_at))
            if at is not None
        ]
        for stale in set(previous.split(b"\n") if previous else ()) - set(current):
            changes[stale] = None
        for key in current:
            changes[key] = b""
        changes[pointer] = b"\n".join(current) if current else None

    def _index_reads(
        self,
        partition: int,
        before: State,
        after: State,
        kept: list[Event],
        changes: dict[bytes, bytes | None],
        counts: Counter[bytes],
    ) -> None:
        old, new = accepted_job(before), accepted_job(after)
        _index_rejection(partition, before, after, changes, counts)
        if isinstance(after, Monitor) and not isinstance(before, Monitor):
            for key in monitor_keys(partition, after.owner, after.created.occurred_at, after.monitor_id):
                changes[key] = b""
        deletion = next((event for event in kept if isinstance(event, JobHistoryDeleted)), None)
        # Before a deletion's: it keeps the creation audits indexed, those of this fold too.
        _index_events(partition, kept, 0 if deletion is None else deletion.sequence, changes)
        if old is not None:
            counts[count_key(partition, old.status)] -= 1
            _list_dead_letter(partition, old, None, changes)
        if deletion is not None:
            gone = accepted_job(replay([e for e in kept if e.sequence < deletion.sequence], before))
            if gone is not None:
                self._forget(partition, gone, deletion, kept, changes)
        if new is not None:
            counts[count_key(partition, new.status)] += 1
            if old is None or deletion is not None:
                _list_job(partition, new, b"", changes)
            _list_dead_letter(partition, new, b"", changes)
        for purge in (event for event in kept if isinstance(event, AuditRecordsPurged)):
            self._purge_audit(partition, purge, kept, changes)

    def _forget(
        self,
        partition: int,
        job: Job,
        deletion: JobHistoryDeleted,
        kept: list[Event],
        changes: dict[bytes, bytes | None],
    ) -> None:
        """A deleted history keeps its audit records (a creation's, kept in its `JobAccepted`, becomes an
        `AuditRecorded` in its place, unless purged); its other events and list entries go."""
        _list_job(partition, job, None, changes)
        changes[tombstone_key(job.job_id)] = b""
        for attempt in job.attempts:
            for artifact in attempt.artifacts:
                changes[artifact_ref_key(partition, artifact.artifact_id, job.job_id)] = None
        for key, event in self._history(job.job_id, kept):
            if event.sequence >= deletion.sequence or isinstance(event, AuditRecorded):
                continue
            audit = audit_of(event)
            if (
                audit is not None
                and self._indexed(audit_key(partition, audit.occurred_at, audit.audit_id), changes) == key
            ):
                changes[key] = encode(audit)
            else:
                changes[key] = None

    def _checkpoint(self, partition: int, job: _Folding, changes: dict[bytes, bytes | None]) -> None:
        """A monitor's state in place of its stored events, at the last event after which a check
        ended or events piled up (never within a check): a point the events alone decide, so a store
        folded from the log in other batches holds the same. The checks and changes the events held
        are listed from the store from then on, and audit records kept."""
        if not isinstance(job.after, Monitor):
            return
        monitor_id = job.after.monitor_id
        previous = self.checkpoint(monitor_id)
        stored = self._stored_after(monitor_id, 0 if previous is None else previous.sequence)
        folded = [(key, decode_event(value)) for key, value in stored]
        folded += [(job.prefix + _sequence_key(event.sequence), event) for event in job.kept]
        cut, state = _checkpoint_point(None if previous is None else monitor_of(previous), folded)
        if state is None:
            return
        for key, event in folded[:cut]:
            changes[key] = None
            audit = audit_of(event)
            entry = None if audit is None else audit_key(partition, audit.occurred_at, audit.audit_id)
            if audit is not None and entry is not None and self._indexed(entry, changes) == key:
                kept_at = b"g/" + key[2:]
                changes[kept_at], changes[entry] = encode(audit), kept_at
        events = [event for _, event in folded[:cut]]
        changes[_checkpoint_key(monitor_id)] = encode(checkpoint_of(state, events[-1].occurred_at))
        _list_older("h", monitor_id, state.checks, check_views(events), changes)
        _list_older("y", monitor_id, state.changes, change_views(events), changes)

    def _indexed(self, entry: bytes, changes: dict[bytes, bytes | None]) -> bytes | None:
        """What an index entry points at once this fold is written."""
        return changes[entry] if entry in changes else self._store.get(entry)

    def _history(self, job_id: UUID, kept: list[Event]) -> list[tuple[bytes, Event]]:
        """The job's stored events (and a monitor's audit records its checkpoint kept) and those of
        this fold, with their keys."""
        prefix = _events_prefix(job_id)
        stored = [(key, decode_event(value)) for key, value in self._kept_audits(job_id)]
        stored += [(key, decode_event(value)) for key, value in self._store.scan(prefix, prefix + b"\xff")]
        return stored + [(prefix + _sequence_key(event.sequence), event) for event in kept]

    def _kept_audits(self, job_id: UUID) -> list[tuple[bytes, bytes]]:
        prefix = b"g/" + _events_prefix(job_id)[2:]
        return list(self._store.scan(prefix, prefix + b"\xff"))

    def _purge_audit(
        self, partition: int, purge: AuditRecordsPurged, kept: list[Event], changes: dict[bytes, bytes | None]
    ) -> None:
        """The audit records written before the purge's `before` go, with their index entries (a
        creation's kept in its `JobAccepted` loses only its entry)."""
        for key, event in self._history(purge.job_id, kept):
            if event.sequence > purge.sequence:
                continue  # written after the purge: a record time from a skewed clock does not reach it
            if key in changes:  # what this fold wrote there (a deleted history's creation audit)
                value = changes[key]
                if value is None:
                    continue
                event = decode_event(value)
            audit = audit_of(event)
            if audit is not None and audit.occurred_at < purge.before:
                changes[audit_key(partition, audit.occurred_at, audit.audit_id)] = None
                if isinstance(event, AuditRecorded):
                    changes[key] = None
        changes[_audit_purged_key(purge.job_id)] = b""

    def _count(self, counts: Counter[bytes], changes: dict[bytes, bytes | None]) -> None:
        for key, delta in counts.items():
            if delta:
                total = int(self._store.get(key) or b"0") + delta
                changes[key] = str(total).encode() if total else None

    def status_counts(self, partitions: Iterable[int]) -> Counter[str]:
        """Jobs by status over `partitions`."""
        totals: Counter[str] = Counter()
        for partition in partitions:
            prefix = index_prefix("n", partition).encode()
            for key, value in self._store.scan(prefix, prefix + b"\xff"):
                totals[key.decode().rsplit("/", 1)[1]] += int(value)
        return totals

    def jobs_page(
        self, partitions: Iterable[int], query: JobQuery, after: str | None, limit: int
    ) -> Page[Listed]:
        """Jobs (and rejected submissions) of `partitions` matching `query`, newest first, from after
        the position `after`."""
        if query.dead_letters:
            prefixes = [index_prefix("x", partition) for partition in partitions]
        elif query.caller is not None:
            prefixes = [index_prefix("c", partition, query.caller) for partition in partitions]
        else:
            prefixes = [index_prefix("j", partition) for partition in partitions]

        def load(at: str, _: bytes) -> Listed | None:
            job = self.load_listed(UUID(at[16:]))
            return job if job is not None and query.matches(job) else None

        oldest_ms = None if query.since is None else int(query.since.timestamp() * 1000)
        return scan_page(self._store, prefixes, load, after, limit, SCAN_BUDGET, oldest_ms)

    def monitors_page(
        self, partitions: Iterable[int], caller: str | None, after: str | None, limit: int
    ) -> Page[Monitor]:
        """Monitors of `partitions` (only `caller`'s, when given), newest first, from after `after`."""
        kind = "m" if caller is None else "w"
        prefixes = [index_prefix(kind, partition, caller) for partition in partitions]

        def load(at: str, _: bytes) -> Monitor | None:
            state = self.load(UUID(at[16:]))
            return state if isinstance(state, Monitor) else None

        return scan_page(self._store, prefixes, load, after, limit, SCAN_BUDGET)

    def jobs_with_id_prefix(self, owned: Callable[[UUID], bool], query: JobQuery, limit: int) -> Page[Listed]:
        """Up to `limit` jobs (and rejected submissions) whose id starts with `query.id_prefix`, of
        the partitions `owned` says this store answers for, newest first."""
        prefix = f"e/{query.id_prefix or ''}".encode()
        found: list[tuple[str, Listed]] = []
        seen: set[bytes] = set()
        for key, _ in self._store.scan(prefix, prefix_end(prefix)):
            job_key_part = key[2:38]
            if job_key_part in seen:
                continue
            seen.add(job_key_part)
            job_id = UUID(job_key_part.decode())
            listed = self.load_listed(job_id) if owned(job_id) else None
            if listed is not None and query.matches(listed):
                found.append((position(_listed_at(listed), job_id), listed))
            if len(seen) >= SCAN_BUDGET or len(found) >= limit:
                break
        return Page(sorted(found, key=lambda item: item[0]), None)

    def accepted_before(
        self, partition: int, cutoff: datetime, after: bytes | None, budget: int
    ) -> tuple[list[Job], bytes | None]:
        """Jobs of `partition` accepted by `cutoff` among the next `budget` index entries after the key
        `after`, and the key to go on from (None at the end of the index)."""
        prefix = index_prefix("j", partition).encode()
        low = max(job_key(partition, cutoff, UUID(int=0)), after + b"\x00" if after else b"")
        jobs: list[Job] = []
        last = None
        for index, (key, _) in enumerate(self._store.scan(low, prefix + b"\xff")):
            if index >= budget:
                return jobs, last
            last = key
            job = self.load_job(UUID(key.decode().rsplit("/", 1)[1]))
            if job is not None:
                jobs.append(job)
        return jobs, None

    def artifact_refs(self, partitions: Iterable[int], artifact_id: UUID) -> list[tuple[Job, Artifact]]:
        """The jobs of `partitions` that stored the artifact, with its record."""
        found = []
        for partition in partitions:
            prefix = artifact_refs_prefix(partition, artifact_id)
            for key, value in self._store.scan(prefix, prefix + b"\xff"):
                job = self.load_job(UUID(key.decode().rsplit("/", 1)[1]))
                artifact = decode(value)
                if job is not None and isinstance(artifact, Artifact):
                    found.append((job, artifact))
        return found

    def audit_page(
        self,
        partitions: Iterable[int],
        matches: Callable[[AuditRecorded], bool],
        after: str | None,
        limit: int,
    ) -> Page[AuditRecorded]:
        """Audit records of `partitions` for which `matches` holds, newest first."""

        def load(_: str, event_key: bytes) -> AuditRecorded | None:
            value = self._store.get(event_key)
            audit = None if value is None else audit_of(decode_event(value))
            return audit if audit is not None and matches(audit) else None

        prefixes = [index_prefix("a", partition) for partition in partitions]
        return scan_page(self._store, prefixes, load, after, limit, SCAN_BUDGET)

    def audited_before(self, partition: int, before: datetime, limit: int) -> list[UUID]:
        """Up to `limit` histories of `partition` holding audit records written before `before`."""
        prefix = index_prefix("a", partition).encode()
        low = f"{index_prefix('a', partition)}{position_before(before)}".encode()
        found: dict[UUID, None] = {}
        for _, event_key in self._store.scan(low, prefix + b"\xff"):
            found[UUID(event_key[2:38].decode())] = None
            if len(found) >= limit:
                break
        return list(found)

    def due(self, partition: int, until: datetime, limit: int | None = None) -> list[tuple[int, UUID]]:
        """(due ms, job id) of `partition` whose next timer is at or before `until`, oldest first
        (at most `limit`)."""
        prefix = f"d/{partition:05d}/".encode()
        high = _timer_key("d", partition, until, _MAX_UUID) + b"\xff"
        return [_parse_timer(key) for key, _ in itertools.islice(self._store.scan(prefix, high), limit)]

    def next_due(self, partition: int) -> int | None:
        """When the earliest timer of `partition` falls due (epoch ms), or None if it has none."""
        prefix = f"d/{partition:05d}/".encode()
        first = next(iter(self._store.scan(prefix, prefix + b"\xff")), None)
        return None if first is None else _parse_timer(first[0])[0]

    def leases_after(self, partition: int, after: datetime) -> list[tuple[int, UUID]]:
        """(expiry ms, job id) of running leases of `partition` that end later than `after`."""
        prefix = f"l/{partition:05d}/".encode()
        low = _timer_key("l", partition, after, _MAX_UUID) + b"\xff"
        return [_parse_timer(key) for key, _ in self._store.scan(low, prefix + b"\xff")]

    def forget_cached(self) -> None:
        """Drop cached states, so the next loads read what the store holds."""
        self._cache.clear()

    def _remember(self, job_id: UUID, state: State) -> None:
        self._cache[job_id] = state
        self._cache.move_to_end(job_id)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)

    def close(self) -> None:
        self._store.close()


def _list_job(partition: int, job: Job, value: bytes | None, changes: dict[bytes, bytes | None]) -> None:
    accepted = job.accepted
    changes[job_key(partition, accepted.occurred_at, job.job_id)] = value
    changes[caller_key(partition, accepted.caller_identity, accepted.occurred_at, job.job_id)] = value


def _listed_at(listed: Listed) -> datetime:
    if isinstance(listed, Job):
        return listed.accepted.occurred_at
    return listed.rejected.occurred_at if listed.rejected is not None else datetime.fromtimestamp(0, UTC)


def _index_rejection(
    partition: int, before: State, after: State, changes: dict[bytes, bytes | None], counts: Counter[bytes]
) -> None:
    """A rejected submission is listed (and counted `REJECTED`) under its latest rejection while no
    job is accepted under its id."""
    old = before.rejected if isinstance(before, Unaccepted) else None
    new = after.rejected if isinstance(after, Unaccepted) else None
    if old is new:
        return
    for rejected, value, change in ((old, None, -1), (new, b"", 1)):
        if rejected is not None:
            counts[count_key(partition, JobStatus.REJECTED)] += change
            changes[job_key(partition, rejected.occurred_at, rejected.job_id)] = value
            owner = rejection_owner(rejected)
            changes[caller_key(partition, owner, rejected.occurred_at, rejected.job_id)] = value


def _list_dead_letter(
    partition: int, job: Job, value: bytes | None, changes: dict[bytes, bytes | None]
) -> None:
    if job.status is JobStatus.DEAD_LETTER and job.completed_at is not None:
        changes[dead_letter_key(partition, job.completed_at, job.job_id)] = value


def _index_events(
    partition: int, kept: list[Event], deleted_before: int, changes: dict[bytes, bytes | None]
) -> None:
    """Audit records always (a creation's own record, later in the log, replaces its acceptance's);
    the artifacts of attempts that are not in a deleted history."""
    for event in kept:
        listed = listed_as_audit(event)
        if listed is not None:
            key = _events_prefix(event.job_id) + _sequence_key(event.sequence)
            changes[audit_key(partition, *listed)] = key
        elif (attempt := recorded_attempt(event)) is not None and event.sequence > deleted_before:
            for artifact in attempt.artifacts:
                changes[artifact_ref_key(partition, artifact.artifact_id, event.job_id)] = encode(artifact)


def _checkpointed(encoded: Sequence[bytes]) -> tuple[MonitorCheckpoint | None, Sequence[bytes]]:
    """A snapshot's checkpoint (its first record, for a checkpointed monitor) and the events after it."""
    if not encoded:
        return None, encoded
    first = decode(encoded[0])
    return (first, encoded[1:]) if isinstance(first, MonitorCheckpoint) else (None, encoded)


def _checkpoint_point(base: State, folded: Sequence[tuple[bytes, Event]]) -> tuple[int, Monitor | None]:
    """How many of the events after a monitor's checkpoint the next one replaces, and the state
    after them (None: none yet): the last event that ends a check, or the `CHECKPOINT_AFTER`th
    since the last such point, with no check in flight after it."""
    state, since, cut, chosen = base, 0, 0, None
    for index, (_, event) in enumerate(folded):
        state = evolve(state, event)
        since += 1
        between = isinstance(state, Monitor) and state.pending is None
        if between and (isinstance(event, CheckRecorded) or since >= CHECKPOINT_AFTER):
            cut, chosen, since = index + 1, state, 0
    return cut, cast(Monitor | None, chosen)


def _checkpoint_key(job_id: UUID) -> bytes:
    return f"v/{uuid_text(job_id)}".encode()


def _list_older(
    kind: str,
    monitor_id: UUID,
    total: int,
    newest_first: Sequence[BaseModel],
    changes: dict[bytes, bytes | None],
) -> None:
    """Lists views that leave the events (the newest of `total` first), and forgets those past the
    newest `LISTED_KEPT`."""
    prefix = f"{kind}/{uuid_text(monitor_id)}/"
    for index, view in enumerate(newest_first[:LISTED_KEPT]):
        ordinal = total - index
        changes[f"{prefix}{ORDINAL_END - ordinal:012d}".encode()] = view.model_dump_json().encode()
        if ordinal > LISTED_KEPT:
            changes[f"{prefix}{ORDINAL_END - ordinal + LISTED_KEPT:012d}".encode()] = None


def _sequence(state: State) -> int:
    return 0 if state is None else state.sequence


def _parse_timer(key: bytes) -> tuple[int, UUID]:
    _, _, due_ms, job_id = key.decode().split("/")
    return int(due_ms), UUID(job_id)


def decode_event(value: bytes) -> Event:
    event = decode(value)
    if not isinstance(event, EVENT_TYPES):
        raise CodecError(f"expected an event, found {type(event).__name__}")
    return cast(Event, event)
