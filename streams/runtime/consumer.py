"""One Kafka consumer per worker, feeding each stage batches of its own topics' records.

The consumer is a member of the worker group; each stage (intake, lifecycle, executor, outbox)
runs as its own task over a queue of its records, one batch at a time:
1. take the records the stage asks for (`batch_size`: up to `max_batch`, within its capacity);
2. `stage.handle(batch)`; an infrastructure failure retries the batch after `stage.recover`,
   any other failure isolates the bad record to dead input, one record at a time;
3. mark the batch's offsets processed; a committer commits them every `COMMIT_EVERY_S`, or at
   once for a stage whose records start work elsewhere (`commit_each_batch`).
What a batch sends, commits and folds, in which order, under each guarantee, is the worker's
`CommitOrder` (`streams/runtime/commit_order.py`): with `exactly_once` each input partition's part of
a batch goes into its partition's transaction, its producer started (fencing its last holder) before
any of its records is handled; a transaction is left open while more of its partition's records are
queued (up to `SPAN_S`), and committed before the lane waits or the partition is revoked.
On revocation, queued records of the revoked partitions are dropped (the new owner reads them),
in-flight batches finish, stages are told, and the processed offsets are committed.
A stage may hand a record to another stage of this worker that holds its partition (`hand_over`)
instead of sending it through the broker: it joins that stage's queue as a `LocalRecord`, and its
sender learns whether it was handled, or left (its partition moved) for the sender to publish.
Every topic is seen with its partitions before the consumer subscribes (a group leader whose
metadata lacks a topic assigns none of it), and a partition of a subscribed topic that no member
of the group holds makes the consumer refresh its metadata and rejoin (`unowned`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.errors import KafkaError

from schemas.codec import encode
from streams.broker.access import KafkaAccess
from streams.broker.clients import kafka_consumer
from streams.broker.compat import BrokerProfile, FetchPacer, partitions_known, refresh_metadata, start_whole
from streams.broker.headers import Headers
from streams.errors import BrokerError
from streams.runtime.commit_order import commit_order
from streams.runtime.deadinput import DeadLetters
from streams.runtime.failures import waiting_for
from streams.runtime.publisher import Written, partition_of
from streams.runtime.routing import Routing
from streams.runtime.transactions import FencedError, NotHeldError, PartitionTransactions

log = logging.getLogger(__name__)
COMMIT_EVERY_S = 0.2
RETRY_BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0)
OWNERSHIP_CHECK_S = 5.0
SETTLE_BELOW_RECORDS = 32
Record = Any  # aiokafka's ConsumerRecord, or a LocalRecord


class LocalRecord:
    """A decoded record handed over inside this worker: no offset, encoded only if it must be
    dead-lettered."""

    __slots__ = ("decoded", "headers", "key", "partition", "replies", "taken", "timestamp", "topic")
    offset = -1

    def __init__(
        self,
        topic: str,
        partition: int,
        key: bytes,
        decoded: Any,
        timestamp_ms: int,
        headers: Headers = (),
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.key = key
        self.decoded = decoded
        self.timestamp = timestamp_ms
        self.headers = headers
        self.replies: list[Any] = []  # what the stage asks its sender to publish with its input (answers)
        self.taken: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    @property
    def value(self) -> bytes:
        return encode(self.decoded)

    def settle(self, taken: bool) -> None:
        if not self.taken.done():
            self.taken.set_result(taken)


def _settle_local(records: Iterable[Record], taken: bool) -> None:
    for record in records:
        if isinstance(record, LocalRecord):
            record.settle(taken)


class PartitionControl(Protocol):
    """What a stage may ask of the consumer: hold partitions back (e.g. while catching up)."""

    def hold(self, partitions: Iterable[TopicPartition], reason: str) -> None: ...

    def release(self, partitions: Iterable[TopicPartition], reason: str) -> None: ...

    def owns(self, partition: TopicPartition) -> bool: ...


class Stage(Protocol):
    name: str
    topics: frozenset[str]
    max_batch: int
    commit_each_batch: bool

    def capacity(self) -> int:
        """How many more records the stage can take now."""

    async def wait_capacity(self) -> None:
        """Returns once `capacity()` is above zero."""

    def batch_size(self, queued: Sequence[Record]) -> int:
        """How many of the queued records, from the front, make the next batch (at least one)."""

    def takes_over(self, partition: int) -> bool:
        """Whether records of `partition` may be handed to this stage inside the worker now."""

    async def handle(self, records: Sequence[Record]) -> None: ...

    async def recover(self, records: Sequence[Record]) -> None:
        """Make the stage's state consistent before a failed batch is retried."""

    async def settled(self) -> None:
        """Returns once work that earlier batches started has sent its output."""

    async def assigned(self, partitions: set[TopicPartition], control: PartitionControl) -> None: ...

    async def revoked(self, partitions: set[TopicPartition]) -> None: ...

    async def close(self) -> None:
        """Finish or abandon work still running after the last batch."""


class QuietStage:
    """Defaults for a stage without a capacity limit or per-partition state."""

    max_batch = 500
    commit_each_batch = False

    def capacity(self) -> int:
        return self.max_batch

    async def wait_capacity(self) -> None:
        return

    def batch_size(self, queued: Sequence[Record]) -> int:
        return min(self.max_batch, max(self.capacity(), 1), len(queued))

    def takes_over(self, partition: int) -> bool:
        return False

    async def recover(self, records: Sequence[Record]) -> None:
        return

    async def settled(self) -> None:
        return

    async def assigned(self, partitions: set[TopicPartition], control: PartitionControl) -> None:
        return

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        return

    async def close(self) -> None:
        return


@dataclass
class _Lane:
    stage: Stage
    queue: deque[Record] = field(default_factory=deque)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    uncommitted: dict[TopicPartition, list[Record]] = field(default_factory=dict)  # in an open transaction


class StageConsumer(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(
        self,
        kafka: KafkaAccess,
        group_id: str,
        profile: BrokerProfile,
        stages: Sequence[Stage],
        dead_letters: DeadLetters,
        assignor: Any = None,
        routing: Routing | None = None,
        transactions: PartitionTransactions | None = None,
    ) -> None:
        self._routing = routing
        self._order = commit_order(transactions)
        self._lanes = [_Lane(stage) for stage in stages]
        self._by_topic = {topic: lane for lane in self._lanes for topic in lane.stage.topics}
        self._dead = dead_letters
        self._consumer = kafka_consumer(
            kafka,
            group_id=group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=max(stage.max_batch for stage in stages),
            rebalance_timeout_ms=profile.rebalance_timeout_ms,
            # `assignor` when every member offers it, else aiokafka's default: upgrades in place.
            partition_assignment_strategy=(
                (assignor, RoundRobinPartitionAssignor) if assignor else (RoundRobinPartitionAssignor,)
            ),
            **profile.consumer_options(),
        )
        self._processed: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._to_commit = asyncio.Event()
        self._held: dict[TopicPartition, set[str]] = defaultdict(set)
        self._revoking: set[TopicPartition] = set()
        # Per partition, the offset its consumer must fetch to before a record may be handed over:
        # one handed over never passes one on the topic (the log at assignment, or one published since).
        self._unfetched: dict[TopicPartition, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self.joined = asyncio.Event()
        self.crashed: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
        self._pacer = FetchPacer(self._consumer, profile)
        self._settle_s = profile.settle_before_fetch_ms / 1000

    async def start(self) -> None:
        try:
            await start_whole(self._consumer.start, self._consumer.stop)
        except KafkaError as exc:
            await self._consumer.stop()
            raise BrokerError(f"cannot join the consumer group: {exc}") from exc
        await partitions_known(self._consumer, self._by_topic)
        self._consumer.subscribe(topics=sorted(self._by_topic), listener=self)
        self._tasks = [asyncio.create_task(self._fetch(), name="consumer.fetch")]
        self._tasks += [asyncio.create_task(self._serve(lane), name=lane.stage.name) for lane in self._lanes]
        self._tasks.append(asyncio.create_task(self._keep_owned(), name="consumer.ownership"))
        self._tasks.append(asyncio.create_task(self._commit_periodically(), name="consumer.commit"))
        for task in self._tasks:
            task.add_done_callback(self._report_crash)

    def unowned(self) -> dict[str, list[int]]:
        """Partitions of the topics this worker reads that no member of its group holds."""
        if self._routing is None:
            return {}
        known = {topic: self._consumer.partitions_for_topic(topic) or set() for topic in self._by_topic}
        return self._routing.unowned(known)

    async def _keep_owned(self) -> None:
        """A partition nobody holds (the leader assigned from metadata that lacked it) is noticed
        within two checks: the metadata is read again and the group rebalances."""
        noticed = False
        while True:
            await asyncio.sleep(OWNERSHIP_CHECK_S)
            unowned = self.unowned() if self.joined.is_set() else {}
            if unowned and noticed:
                log.warning("partitions %s are held by no worker: rebalancing the group", unowned)
                with contextlib.suppress(KafkaError):
                    await refresh_metadata(self._consumer)
                self._rejoin()
            noticed = bool(unowned) and not noticed

    async def stop(self) -> None:
        """Finish the batches in hand, commit what was processed, leave the group."""
        self._stopping = True
        for lane in self._lanes:
            lane.wake.set()
        if self._tasks:
            fetch, *_, owned, committer = self._tasks
            fetch.cancel()
            owned.cancel()
            committer.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for lane in self._lanes:
            _settle_local(lane.queue, taken=False)
        for lane in self._lanes:
            await lane.stage.close()
        with contextlib.suppress(KafkaError):
            await self._commit()
        await self._consumer.stop()
        await self._order.close()

    # The consumer side ---------------------------------------------------------------------------

    def owns(self, partition: TopicPartition) -> bool:
        return partition in self._consumer.assignment()

    def assigned(self) -> set[TopicPartition]:
        return set(self._consumer.assignment())

    def lag(self) -> dict[tuple[str, int], int]:
        """Records not yet processed, per assigned topic-partition (from the last fetch's high watermark)."""
        behind = {}
        for tp in self._consumer.assignment():
            highwater = self._consumer.highwater(tp)
            if highwater is not None:
                behind[(tp.topic, tp.partition)] = max(highwater - self._processed.get(tp, 0), 0)
        return behind

    def hold(self, partitions: Iterable[TopicPartition], reason: str) -> None:
        held = [tp for tp in partitions if self.owns(tp)]
        for tp in held:
            self._held[tp].add(reason)
        self._consumer.pause(*held)

    def release(self, partitions: Iterable[TopicPartition], reason: str) -> None:
        free = []
        for tp in partitions:
            self._held[tp].discard(reason)
            if not self._held[tp] and self.owns(tp):
                free.append(tp)
        self._consumer.resume(*free)

    def takes(self, topic: str, key: bytes) -> bool:
        """Whether a record for `topic` with `key` would be handed over now."""
        return self._local_partition(topic, key) is not None

    def _local_partition(self, topic: str, key: bytes) -> int | None:
        lane = self._by_topic.get(topic)
        partitions = self._consumer.partitions_for_topic(topic)
        if lane is None or not partitions or self._stopping:
            return None
        partition = partition_of(key, len(partitions))
        tp = TopicPartition(topic, partition)
        if tp in self._revoking or tp in self._unfetched or not self.owns(tp):
            return None
        if not lane.stage.takes_over(partition):
            return None
        return partition

    def hand_over(
        self, topic: str, key: bytes, decoded: Any, timestamp_ms: int, headers: Headers = ()
    ) -> LocalRecord | None:
        """Queue `decoded` for the stage of this worker that reads the partition `key` goes to, if
        this worker holds it and the stage takes it over now; None when it must be published. Its
        `taken` says whether the stage handled it, its `replies` what the sender publishes then."""
        lane = self._by_topic.get(topic)
        partition = self._local_partition(topic, key)
        if lane is None or partition is None:
            return None
        record = LocalRecord(topic, partition, key, decoded, timestamp_ms, headers)
        lane.queue.append(record)
        lane.idle.clear()
        lane.wake.set()
        return record

    async def _fetch(self) -> None:
        while not self._stopping:
            try:
                batches = await self._consumer.getmany(timeout_ms=1000)
            except KafkaError as exc:
                log.warning("fetching records failed (%s); retrying", exc)
                await asyncio.sleep(RETRY_BACKOFF_S[2])
                continue
            polled = sum(len(records) for records in batches.values())
            self._pacer.observed(polled)
            for tp, records in batches.items():
                lane = self._by_topic[tp.topic]
                lane.queue.extend(records)
                lane.idle.clear()
                lane.wake.set()
                if len(lane.queue) >= 2 * lane.stage.max_batch:
                    self.hold(self._lane_partitions(lane), "backpressure")
            await self._caught_up()
            if 0 < polled < SETTLE_BELOW_RECORDS and self._settle_s:
                await self._settle()

    def published(self, written: Iterable[Written]) -> None:
        """Records a sender published instead of handing them over: until its consumer fetched them,
        no record of their partitions is handed over (it would be decided before them)."""
        for where in written:
            tp = TopicPartition(where.topic, where.partition)
            self._unfetched[tp] = max(self._unfetched.get(tp, 0), where.offset + 1)

    async def _caught_up(self) -> None:
        """Partitions whose consumer has fetched past what it had to take hand-overs again: queued
        behind those records, a record handed over is decided after them."""
        for tp, end in list(self._unfetched.items()):
            if tp not in self._consumer.assignment() or await self._consumer.position(tp) >= end:
                self._unfetched.pop(tp, None)

    async def _behind_at_assignment(self, assigned: set[TopicPartition]) -> None:
        """Which assigned partitions hold records not yet fetched, and up to where."""
        ends = await self._consumer.end_offsets(list(assigned))
        for tp, end in ends.items():
            if await self._consumer.position(tp) < end:
                self._unfetched[tp] = max(self._unfetched.get(tp, 0), end)

    async def _settle(self) -> None:
        """Hold the next fetch (briefly) until the stages wrote what the last records caused."""
        partitions = set(self._consumer.assignment())
        self.hold(partitions, "settling")  # before the fetcher task runs: no fetch goes out meanwhile
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settle_s):
                    await self._settled()
        finally:
            self.release(partitions, "settling")

    async def _settled(self) -> None:
        for lane in self._lanes:
            await lane.idle.wait()
            await lane.stage.settled()

    def _lane_partitions(self, lane: _Lane) -> list[TopicPartition]:
        return [tp for tp in self._consumer.assignment() if tp.topic in lane.stage.topics]

    # The stage side ------------------------------------------------------------------------------

    async def _serve(self, lane: _Lane) -> None:
        stage = lane.stage
        while not self._stopping:
            if lane.uncommitted and (not lane.queue or stage.capacity() <= 0):
                async with lane.lock:  # nothing more to add to the open transactions now
                    await self._end_open(lane)
            if not lane.queue:
                lane.idle.set()
                await lane.wake.wait()
                lane.wake.clear()
                continue
            await stage.wait_capacity()
            async with lane.lock:
                size = stage.batch_size(lane.queue)
                batch = [lane.queue.popleft() for _ in range(size)]
                done = []
                for part in self._order.parts(batch):
                    done += await self._serve_part(lane, part)
                self._mark_processed(done)
                if stage.commit_each_batch and done:
                    await self._commit_quietly({TopicPartition(r.topic, r.partition) for r in done})
                await self._end_open(lane, spanned_only=True)
            if len(lane.queue) < stage.max_batch:
                self.release(self._lane_partitions(lane), "backpressure")
        async with lane.lock:
            await self._end_open(lane)

    async def _serve_part(self, lane: _Lane, part: list[Record]) -> list[Record]:
        """Handle one input partition's part, in the transaction its earlier parts left open if any."""
        tp = TopicPartition(part[0].topic, part[0].partition)
        earlier = lane.uncommitted.pop(tp, [])
        handled = await self._run(lane.stage, part, earlier, keep_open=True)
        pending: list[Record] = []
        if self._order.is_open(tp):
            pending = lane.uncommitted[tp] = [*earlier, *handled]
        else:
            _settle_local(handled, taken=True)
        waiting = {id(record) for record in pending}  # settled when their transaction ends
        _settle_local((r for r in [*earlier, *part] if id(r) not in waiting), taken=False)
        return handled

    async def _end_open(
        self, lane: _Lane, spanned_only: bool = False, only: set[TopicPartition] | None = None
    ) -> None:
        """Commit the transactions left open: all (of `only`), or those open for `SPAN_S` or with none of
        their partition's records queued. A transaction that fails has its records handled again."""
        queued = {(r.topic, r.partition) for r in lane.queue} if spanned_only and lane.uncommitted else set()
        for tp in list(lane.uncommitted):
            if only is not None and tp not in only:
                continue
            if spanned_only and (tp.topic, tp.partition) in queued and not self._order.spanned(tp):
                continue
            records = lane.uncommitted.pop(tp)
            try:
                await self._order.end(tp)
            except (FencedError, NotHeldError) as exc:
                self._let_go(lane.stage, records, exc)
                _settle_local(records, taken=False)
                continue
            except Exception as exc:
                log.warning(
                    "%s: committing %d records of %s failed (%s); handling them again",
                    lane.stage.name, len(records), tp, exc,
                )  # fmt: skip
                await self._recover(lane.stage, records)
                _settle_local(await self._run(lane.stage, records), taken=True)
                _settle_local(records, taken=False)
            else:
                _settle_local(records, taken=True)

    async def _handle(self, stage: Stage, batch: list[Record], keep_open: bool = False) -> None:
        async with self._order.transaction_of(batch, keep_open):
            await stage.handle(batch)

    async def _run(
        self, stage: Stage, batch: list[Record], earlier: Sequence[Record] = (), keep_open: bool = False
    ) -> list[Record]:
        """Handle `batch` (with `keep_open`, in the transaction `earlier` records left open, if any);
        returns the records done (handled or sent to dead input). A failure aborts the transaction, so
        `earlier` records are handled again with the batch."""
        for attempt in range(1_000_000):
            if self._revoking:
                batch = [r for r in batch if TopicPartition(r.topic, r.partition) not in self._revoking]
            if not batch:
                return []  # the partitions moved to another worker meanwhile: it reads them again
            try:
                await self._handle(stage, batch, keep_open)
                return batch
            except (FencedError, NotHeldError) as exc:
                return self._let_go(stage, batch, exc)
            except Exception as exc:
                batch, earlier, keep_open = [*earlier, *batch], (), False
                what = waiting_for(exc)
                if what is None:
                    return await self._isolate(stage, batch, exc)
                delay = RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)]
                log.warning(
                    "%s: waiting for %s (%s: %s); retrying %d records in %.1f s",
                    stage.name, what, type(exc).__name__, exc, len(batch), delay,
                )  # fmt: skip
                await asyncio.sleep(delay)
                await self._recover(stage, batch)
        raise AssertionError("unreachable")

    async def _recover(self, stage: Stage, batch: list[Record]) -> None:
        try:
            await stage.recover(batch)
        except Exception as exc:
            log.warning("%s: recovery before retry failed (%s); the retry recovers again", stage.name, exc)

    async def _isolate(self, stage: Stage, batch: list[Record], exc: Exception) -> list[Record]:
        """A failure that is not the infrastructure's: find the record that causes it."""
        if len(batch) == 1:
            (record,) = batch
            reason = f"{stage.name} cannot handle it: {type(exc).__name__}: {exc}"
            log.error("%s/%d@%d: %s", record.topic, record.partition, record.offset, reason, exc_info=exc)
            try:
                async with self._order.transaction_of([record]):
                    await self._dead.send(
                        record.topic, record.partition, record.offset, record.key, record.value, reason
                    )
            except (FencedError, NotHeldError) as lost:
                return self._let_go(stage, batch, lost)
            return batch
        log.warning(
            "%s: a batch of %d failed (%s); handling its records one by one", stage.name, len(batch), exc
        )
        await self._recover(stage, batch)
        done: list[Record] = []
        for record in batch:
            done += await self._run(stage, [record])
        return done

    def _let_go(self, stage: Stage, batch: list[Record], exc: FencedError | NotHeldError) -> list[Record]:
        """A batch of partitions this worker no longer holds is not done: their holder reads it."""
        if isinstance(exc, FencedError):
            log.warning("%s: %s; leaving it to its new holder and rejoining the group", stage.name, exc)
            self._rejoin()
        elif any(self.owns(TopicPartition(r.topic, r.partition)) for r in batch):
            log.warning("%s: a partition is assigned but not held; rejoining the group", stage.name)
            self._rejoin()
        return []

    # Offsets and rebalancing ---------------------------------------------------------------------

    def _mark_processed(self, batch: list[Record]) -> None:
        last: dict[tuple[str, int], int] = {}
        for record in batch:
            if record.offset >= 0:
                last[(record.topic, record.partition)] = record.offset + 1
        for (topic, partition), offset in last.items():
            tp = TopicPartition(topic, partition)
            self._processed[tp] = max(self._processed.get(tp, 0), offset)
        if last:
            self._to_commit.set()

    async def _commit(self, only: set[TopicPartition] | None = None) -> None:
        if not self._order.commits_offsets:
            return  # each batch's offsets committed with its transaction
        assignment = self._consumer.assignment()
        due = {
            tp: offset
            for tp, offset in self._processed.items()
            if offset != self._committed.get(tp) and tp in assignment and (only is None or tp in only)
        }
        if due:
            await self._consumer.commit(due)
            self._committed.update(due)

    async def _commit_periodically(self) -> None:
        while self._order.commits_offsets:
            await self._to_commit.wait()  # an idle consumer does not wake to commit nothing
            await asyncio.sleep(COMMIT_EVERY_S)
            self._to_commit.clear()
            await self._commit_quietly()
            if any(offset != self._committed.get(tp) for tp, offset in self._processed.items()):
                self._to_commit.set()

    async def _commit_quietly(self, only: set[TopicPartition] | None = None) -> None:
        try:
            await self._commit(only)
        except KafkaError as exc:
            log.info("offset commit failed (%s); the next one retries", exc)

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._revoking = set(revoked)
        for lane in self._lanes:
            kept, dropped = _split(lane.queue, revoked)
            _settle_local(dropped, taken=False)
            lane.queue = deque(kept)
        for lane in self._lanes:
            async with lane.lock:
                await self._end_open(lane, only=revoked)
                await lane.stage.revoked({tp for tp in revoked if tp.topic in lane.stage.topics})
        try:
            await self._commit(only=revoked)
        except KafkaError as exc:
            log.warning("committing revoked partitions failed (%s); their new owner may redo work", exc)
        await self._order.revoked(set(revoked))
        for tp in revoked:
            self._processed.pop(tp, None)
            self._committed.pop(tp, None)
            self._held.pop(tp, None)
            self._unfetched.pop(tp, None)
        self._revoking = set()

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.hold(assigned, "commit order")  # no batch of them before the commit order has taken them
        try:
            try:
                await self._order.assigned(assigned, self._read_again)
                await self._behind_at_assignment(assigned)
            except (BrokerError, KafkaError) as exc:
                log.warning("cannot take the assigned partitions (%s); rejoining the group", exc)
                self._rejoin()
                return
            for lane in self._lanes:
                mine = {tp for tp in assigned if tp.topic in lane.stage.topics}
                if mine:
                    await lane.stage.assigned(mine, self)
            self.joined.set()
        finally:
            self.release(assigned, "commit order")

    async def _read_again(self, assigned: set[TopicPartition]) -> None:
        """From the committed offsets, dropping what was fetched from before them."""
        for tp in assigned:
            committed = await self._consumer.committed(tp)
            if committed is not None:
                self._consumer.seek(tp, committed)
        for lane in self._lanes:
            kept, dropped = _split(lane.queue, assigned)
            _settle_local(dropped, taken=False)
            lane.queue = deque(kept)

    def _rejoin(self) -> None:
        self._consumer._coordinator.request_rejoin()  # aiokafka has no public call for it

    def assignment(self) -> set[TopicPartition]:
        return set(self._consumer.assignment())

    def _report_crash(self, task: asyncio.Task[None]) -> None:
        """A consumer task ends only when the worker stops; otherwise the worker must stop too."""
        if task.cancelled() or task.exception() is None or self._stopping:
            return
        error = task.exception()
        log.critical("consumer task %s crashed: this worker stops", task.get_name(), exc_info=error)
        if error is not None and not self.crashed.done():
            self.crashed.set_result(error)


def _split(queue: Iterable[Record], partitions: set[TopicPartition]) -> tuple[list[Record], list[Record]]:
    """The queued records outside `partitions`, and those of them."""
    kept: list[Record] = []
    dropped: list[Record] = []
    for record in queue:
        (dropped if TopicPartition(record.topic, record.partition) in partitions else kept).append(record)
    return kept, dropped
