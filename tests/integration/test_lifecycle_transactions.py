"""The lifecycle inside a transaction that spans several batches (Apache Kafka, `exactly_once`): a
later batch decides on the states the earlier ones left unfolded, the store folds them only once the
transaction commits, and an abort forgets them, so the batches handled again decide anew."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta

import pytest
from aiokafka import TopicPartition

from projections.lifecycle.submission import submission_identity
from schemas.codec import decode
from schemas.enums import JobStatus
from schemas.records import Request
from streams.agents.lifecycle import Incoming, Lifecycle
from streams.broker.access import plaintext
from streams.clock import utc_now
from streams.runtime.commit_order import Batch
from streams.runtime.deadinput import DeadLetters
from streams.runtime.publisher import Publisher
from streams.runtime.transactions import OpenTransaction, PartitionTransactions
from tests.brokers import fresh_topics, profile
from tests.integration.test_lifecycle_crash_windows import store_of
from tests.integration.test_transactions import committed_values, kafka_only
from tests.lifecycle import submit

pytestmark = [pytest.mark.broker, pytest.mark.asyncio(loop_scope="function")]
PARTITION = 0


@pytest.fixture
async def running(broker, tmp_path):  # type: ignore[no-untyped-def]
    """A lifecycle of partition 0, its store, its partition's transactions and its settings."""
    kafka_only(broker)
    settings = await fresh_topics(broker, data_dir=tmp_path)
    publisher = Publisher(settings.kafka_access, profile(settings.kafka_bootstrap))
    await publisher.start()
    bootstrap = settings.kafka_bootstrap
    transactions = PartitionTransactions(plaintext(bootstrap), profile(bootstrap), settings.group_id)
    commands = TopicPartition(settings.topic("commands"), PARTITION)
    store = store_of()
    lifecycle = Lifecycle(
        settings,
        profile(settings.kafka_bootstrap),
        store,
        publisher,
        settings.policy(),
        DeadLetters(settings, publisher, Counter()),
        utc_now,
    )
    await lifecycle.adopt(PARTITION)
    await transactions.hold({commands})
    try:
        yield lifecycle, store, transactions, commands, settings
    finally:
        await transactions.close()
        await publisher.stop()


async def batch(lifecycle: Lifecycle, transaction: OpenTransaction, *commands: object) -> None:
    incoming = [Incoming(PARTITION, command, utc_now()) for command in commands]
    await lifecycle.handle_batch(incoming, (), Batch(transaction))  # type: ignore[arg-type]


async def committed_events(settings) -> list[str]:  # type: ignore[no-untyped-def]
    values = await committed_values(settings.kafka_bootstrap, settings.topic("events"))
    return [type(decode(value)).__name__ for value in values]


async def test_later_batches_decide_on_the_open_transactions_states_which_fold_once_it_commits(
    running, caplog
):
    lifecycle, store, transactions, commands, settings = running
    first, second = (
        submit(deadline_at=utc_now() + timedelta(hours=1), request=Request(url=f"https://example.com/{n}"))
        for n in range(2)
    )
    first_id, second_id = submission_identity(first)[0], submission_identity(second)[0]
    caplog.set_level(logging.WARNING)
    async with transactions.transaction(commands, 1, keep_open=True) as transaction:
        await batch(lifecycle, transaction, first)
    assert store.load_job(first_id) is None  # not committed: not folded
    async with transactions.transaction(commands, 3, keep_open=True) as transaction:
        await batch(lifecycle, transaction, first, second)  # the first again: known from the open transaction
    assert transactions.is_open(commands)
    await transactions.end(commands)
    assert await committed_events(settings) == ["JobAccepted", "JobAccepted"]  # the first once
    assert store.load_job(first_id).status is JobStatus.LEASED
    assert store.load_job(second_id).status is JobStatus.LEASED
    # Both batches folded in turn, past the commit's marker, without reading the log again.
    assert store.events_offset(PARTITION) == 3
    assert "another writer" not in caplog.text


async def test_a_failing_batch_aborts_the_open_transaction_and_its_states_are_forgotten(running):
    lifecycle, store, transactions, commands, settings = running
    command = submit(deadline_at=utc_now() + timedelta(hours=1))
    job_id = submission_identity(command)[0]
    async with transactions.transaction(commands, 1, keep_open=True) as transaction:
        await batch(lifecycle, transaction, command)
    with pytest.raises(RuntimeError):
        async with transactions.transaction(commands, 2, keep_open=True) as transaction:
            raise RuntimeError("the second batch fails")
    assert not transactions.is_open(commands)
    assert store.load_job(job_id) is None
    async with transactions.transaction(
        commands, 1
    ) as transaction:  # handled again: decided anew, not "known"
        await batch(lifecycle, transaction, command)
    assert await committed_events(settings) == ["JobAccepted"]
    assert store.load_job(job_id).status is JobStatus.LEASED
