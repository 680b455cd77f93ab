"""The brokers scrapestream runs on (the embedded tansu, Apache Kafka for tests and benchmarks),
the compatibility layer tansu needs, and one rule for every client: no topic is ever created by
asking for it. aiokafka's metadata requests ask the broker to auto-create the topics they name,
and a broker with `auto.create.topics.enable` (its default) would create a mistyped or
unprovisioned topic with its own defaults; topics are made by `scrapestream topics create`."""

from functools import partial

import aiokafka.admin.client
import aiokafka.client
from aiokafka.protocol.metadata import MetadataRequest

_NEVER_CREATING = partial(MetadataRequest, allow_auto_topic_creation=False)
aiokafka.client.MetadataRequest = _NEVER_CREATING
aiokafka.admin.client.MetadataRequest = _NEVER_CREATING
