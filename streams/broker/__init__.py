"""The brokers scrapestream runs on (the embedded tansu, Apache Kafka for tests and benchmarks),
the compatibility layer tansu needs, and one rule for every client: no topic is ever created by
asking for it. aiokafka's metadata requests ask the broker to auto-create the topics they name,
and a broker with `auto.create.topics.enable` (its default) would create a mistyped or
unprovisioned topic with its own defaults; topics are made by `scrapestream topics create`.

And one for transactional producers: a transaction begun right after the last one committed is
refused (`CONCURRENT_TRANSACTIONS`) until the broker has written the last one's markers, a few
milliseconds; aiokafka asks again after 20 ms, which made every transaction take 27 ms on an
idle one-node Kafka. Asking again after 2 ms takes 7 ms (`bench.transactions`)."""

from functools import partial

import aiokafka.admin.client
import aiokafka.client
import aiokafka.producer.sender
from aiokafka.protocol.metadata import MetadataRequest

_NEVER_CREATING = partial(MetadataRequest, allow_auto_topic_creation=False)
aiokafka.client.MetadataRequest = _NEVER_CREATING
aiokafka.admin.client.MetadataRequest = _NEVER_CREATING

aiokafka.producer.sender.BACKOFF_OVERRIDE = 0.002
