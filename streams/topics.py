"""Creates scrapestream's topics if missing, and refuses to run on mismatched partition counts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from schemas.errors import ScrapestreamError
from streams.broker.compat import start_whole
from streams.errors import BrokerError
from streams.settings import TOPIC_NAMES, Settings

# The lifecycle reads events partition p for commands partition p: the two must match.
CO_PARTITIONED = ("commands", "events", "snapshots")
# Keyed by request identity, job id or object; only the latest record of each key matters.
COMPACTED = frozenset({"cache", "snapshots", "references"})
ROUTES_RETENTION_MS = 7 * 86_400_000


class TopicLayoutError(ScrapestreamError):
    """Existing topics whose layout scrapestream cannot run on."""


async def ensure_topics(settings: Settings, runners: Iterable[str] = ()) -> None:
    """`runners`: the job types whose due topics must exist besides `http.fetch`'s."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    try:
        await start_whole(admin.start, admin.close)
    except KafkaError as exc:
        await admin.close()
        raise BrokerError(f"cannot reach Kafka at {settings.kafka_bootstrap}: {exc}") from exc
    try:
        existing = set(await admin.list_topics())
        wanted = {settings.topic(name): name for name in TOPIC_NAMES}
        wanted.update({settings.due_topic(runner): "due" for runner in runners})
        missing = [(topic, kind) for topic, kind in wanted.items() if topic not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):  # another worker created them first
                await admin.create_topics([_new_topic(settings, topic, kind) for topic, kind in missing])
        described = await admin.describe_topics([settings.topic(name) for name in CO_PARTITIONED])
    finally:
        await admin.close()
    counts = {topic["topic"]: len(topic["partitions"]) for topic in described}
    if len(set(counts.values())) > 1:
        raise TopicLayoutError(
            f"commands, events and snapshots topics must have equal partition counts, found {counts}"
        )


def _new_topic(settings: Settings, topic: str, name: str) -> NewTopic:
    configs = {"cleanup.policy": "compact"} if name in COMPACTED else {}
    if name == "events" and settings.events_retention_hours > 0:
        # Recovery needs only the events after the latest snapshot mark (`streams/snapshots.py`).
        configs["retention.ms"] = str(int(settings.events_retention_hours * 3_600_000))
    if name == "routes":
        # A budget period's spend is read from its reservations: keep two of the longest periods.
        longest_s = max([route.period_s for route in settings.routes.values()], default=0)
        configs["retention.ms"] = str(max(ROUTES_RETENTION_MS, 2 * longest_s * 1000))
    partitions, replication = settings.partitions, settings.replication_factor
    return NewTopic(topic, partitions, replication, topic_configs=configs)
