"""One Kafka consumer per worker, feeding each stage batches of its own topics' records.

The consumer is a member of the worker group; each stage (intake, lifecycle, executor, outbox)
runs as its own task over a queue of its records, one batch at a time:
1. take the records the stage asks for (`batch_size`: up to `max_batch`, within its capacity);
2. `stage.handle(batch)`; an infrastructure failure retries the batch after `stage.recover`,
   any other failure isolates the bad record to dead input, one record at a time;
3. mark the batch's offsets processed (`Offsets`); a committer commits them every `COMMIT_EVERY_S`, or at
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
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.errors import KafkaError

from streams.broker.access import KafkaAccess
from streams.broker.clients import kafka_consumer
from streams.broker.compat import BrokerProfile, FetchPacer, partitions_known, refresh_metadata, start_whole
from streams.broker.headers import Headers
from streams.errors import BrokerError
from streams.runtime.batches import RETRY_BACKOFF_S, BatchRunner
from streams.runtime.commit_order import OUTSIDE, Batch, commit_order
from streams.runtime.deadinput import DeadLetters
from streams.runtime.local_records import LocalRecord, settle_local
from streams.runtime.offsets import Offsets
from streams.runtime.pauses import Pauses
from streams.runtime.publisher import Written, partition_of
from streams.runtime.routing import Routing
from streams.runtime.transactions import PartitionTransactions
from streams.runtime.unfetched import Unfetched

log = logging.getLogger(__name__)
OWNERSHIP_CHECK_S = 5.0
SETTLE_BELOW_RECORDS = 32
Record = Any  # aiokafka's ConsumerRecord, or a LocalRecord


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

    async def handle(self, records: Sequence[Record], batch: Batch = OUTSIDE) -> None: ...

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
        self._consumer = kafka_consumer(
            kafka,
            group_id=group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=max(stage.max_batch for stage in stages),
            rebalance_timeout_ms=profile.rebalance_timeout_ms,
            # One assignor: aiokafka sends a JoinGroup per assignor offered, each a change of metadata
            # that makes the group rebalance again (with two, members could rebalance for good).
            partition_assignment_strategy=(assignor or RoundRobinPartitionAssignor,),
            **profile.consumer_options(),
        )
        self._offsets = Offsets(self._consumer, self._order.commits_offsets)
        self._unfetched = Unfetched(self._consumer)
        self._pauses = Pauses(self._consumer)
        self._batches = BatchRunner(self._order, dead_letters, self)
        self._revoking: set[TopicPartition] = set()
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
        self._tasks.append(asyncio.create_task(self._offsets.commit_periodically(), name="consumer.commit"))
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
                self.rejoin()
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
            settle_local(lane.queue, taken=False)
        for lane in self._lanes:
            await lane.stage.close()
        with contextlib.suppress(KafkaError):
            await self._offsets.commit()
        await self._consumer.stop()
        await self._order.close()

    # The consumer side ---------------------------------------------------------------------------

    def owns(self, partition: TopicPartition) -> bool:
        return partition in self._consumer.assignment()

    def assigned(self) -> set[TopicPartition]:
        return set(self._consumer.assignment())

    def lag(self) -> dict[tuple[str, int], int]:
        """Records not yet processed, per assigned topic-partition (from the last fetch's high watermark)."""
        return self._offsets.lag()

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
        if tp in self._revoking or self._unfetched.blocks(tp) or not self.owns(tp):
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
                    self._pauses.hold(self._lane_partitions(lane), "backpressure")
            await self._unfetched.fetched()
            if 0 < polled < SETTLE_BELOW_RECORDS and self._settle_s:
                await self._settle()

    def published(self, written: Iterable[Written]) -> None:
        """Records a sender published instead of handing them over: until its consumer fetched them,
        no record of their partitions is handed over (it would be decided before them)."""
        self._unfetched.published(written)

    async def _settle(self) -> None:
        """Hold the next fetch (briefly) until the stages wrote what the last records caused."""
        partitions = set(self._consumer.assignment())
        self._pauses.hold(partitions, "settling")  # before the fetcher task runs: no fetch goes out meanwhile
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settle_s):
                    await self._settled()
        finally:
            self._pauses.release(partitions, "settling")

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
                    await self._batches.end_open(lane.stage, lane.uncommitted, lane.queue)
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
                self._offsets.mark(done)
                if stage.commit_each_batch and done:
                    await self._offsets.commit_quietly({TopicPartition(r.topic, r.partition) for r in done})
                await self._batches.end_open(lane.stage, lane.uncommitted, lane.queue, spanned_only=True)
            if len(lane.queue) < stage.max_batch:
                self._pauses.release(self._lane_partitions(lane), "backpressure")
        async with lane.lock:
            await self._batches.end_open(lane.stage, lane.uncommitted, lane.queue)

    async def _serve_part(self, lane: _Lane, part: list[Record]) -> list[Record]:
        """Handle one input partition's part, in the transaction its earlier parts left open if any."""
        tp = TopicPartition(part[0].topic, part[0].partition)
        earlier = lane.uncommitted.pop(tp, [])
        handled = await self._batches.run(lane.stage, part, earlier, keep_open=True)
        pending: list[Record] = []
        if self._order.is_open(tp):
            pending = lane.uncommitted[tp] = [*earlier, *handled]
        else:
            settle_local(handled, taken=True)
        waiting = {id(record) for record in pending}  # settled when their transaction ends
        settle_local((r for r in [*earlier, *part] if id(r) not in waiting), taken=False)
        return handled

    # Offsets and rebalancing ---------------------------------------------------------------------

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._revoking = set(revoked)
        for lane in self._lanes:
            kept, dropped = _split(lane.queue, revoked)
            settle_local(dropped, taken=False)
            lane.queue = deque(kept)
        for lane in self._lanes:
            async with lane.lock:
                await self._batches.end_open(lane.stage, lane.uncommitted, lane.queue, only=revoked)
                await lane.stage.revoked({tp for tp in revoked if tp.topic in lane.stage.topics})
        try:
            await self._offsets.commit(only=revoked)
        except KafkaError as exc:
            log.warning("committing revoked partitions failed (%s); their new owner may redo work", exc)
        await self._order.revoked(set(revoked))
        for tp in revoked:
            self._offsets.forget(tp)
            self._pauses.forget(tp)
            self._unfetched.forget(tp)
        self._revoking = set()

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._pauses.hold(assigned, "commit order")  # no batch of them before the commit order has taken them
        try:
            try:
                await self._order.assigned(assigned, self._read_again)
                await self._unfetched.assigned(assigned)
            except (BrokerError, KafkaError) as exc:
                log.warning("cannot take the assigned partitions (%s); rejoining the group", exc)
                self.rejoin()
                return
            for lane in self._lanes:
                mine = {tp for tp in assigned if tp.topic in lane.stage.topics}
                if mine:
                    await lane.stage.assigned(mine, self._pauses)
            self.joined.set()
        finally:
            self._pauses.release(assigned, "commit order")

    async def _read_again(self, assigned: set[TopicPartition]) -> None:
        """From the committed offsets, dropping what was fetched from before them."""
        for tp in assigned:
            committed = await self._consumer.committed(tp)
            if committed is not None:
                self._consumer.seek(tp, committed)
        for lane in self._lanes:
            kept, dropped = _split(lane.queue, assigned)
            settle_local(dropped, taken=False)
            lane.queue = deque(kept)

    def rejoin(self) -> None:
        self._consumer._coordinator.request_rejoin()  # aiokafka has no public call for it

    def revoking(self) -> set[TopicPartition]:
        return self._revoking

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
