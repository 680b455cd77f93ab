"""Every Kafka client scrapestream builds is made here, from one `KafkaAccess` (bootstrap, security
protocol, SASL login, TLS files), and aiokafka follows two rules before the
first one is (applied explicitly, once; importing a module changes nothing):

- no metadata request asks the broker to create the topics it names. aiokafka's do, and a broker
  with `auto.create.topics.enable` (its default) would create a mistyped or unprovisioned topic
  with its own defaults; topics are made by `scrapestream topics create`.
- a transactional producer refused `CONCURRENT_TRANSACTIONS` (a transaction begun right after the
  last one committed, before the broker wrote its markers) asks again after 2 ms, not aiokafka's
  20 ms, which made every transaction take 27 ms on an idle one-node Kafka (`bench.transactions`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import aiokafka.admin.client
import aiokafka.client
import aiokafka.producer.sender
from aiokafka import AIOKafkaClient, AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.metadata import MetadataRequest

from streams.broker.access import KafkaAccess

TRANSACTION_RETRY_S = 0.002
_FOLLOWED: list[bool] = []


def follow_rules() -> None:
    """Makes aiokafka follow the two rules above; idempotent."""
    if _FOLLOWED:
        return
    never_creating = partial(MetadataRequest, allow_auto_topic_creation=False)
    aiokafka.client.MetadataRequest = never_creating
    aiokafka.admin.client.MetadataRequest = never_creating
    aiokafka.producer.sender.BACKOFF_OVERRIDE = TRANSACTION_RETRY_S
    _FOLLOWED.append(True)


def kafka_consumer(access: KafkaAccess, *topics: str, **options: Any) -> AIOKafkaConsumer:
    follow_rules()
    return AIOKafkaConsumer(*topics, **access.client_options(), **options)


def kafka_producer(access: KafkaAccess, **options: Any) -> AIOKafkaProducer:
    follow_rules()
    return AIOKafkaProducer(**access.client_options(), **options)


def kafka_admin(access: KafkaAccess, **options: Any) -> AIOKafkaAdminClient:
    follow_rules()
    return AIOKafkaAdminClient(**access.client_options(), **options)


def kafka_client(access: KafkaAccess, **options: Any) -> AIOKafkaClient:
    follow_rules()
    return AIOKafkaClient(**access.client_options(), **options)
