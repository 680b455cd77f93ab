"""scrapestream's topics, as the settings say they must be: found, created, checked, described.

Each topic has a partition count, a replication factor and the configs that matter to
scrapestream (`cleanup.policy`, `retention.ms` where it is set, `min.insync.replicas`,
`max.message.bytes`, and the segment settings of compacted topics). `scrapestream topics create`
creates the missing ones; `check` names every missing or misconfigured one; a worker refuses to
start on such a layout with the same words, unless it is told to create what is missing
(`SCRAPESTREAM_CREATE_TOPICS`, as `dev` is). No topic is ever left for a client to auto-create
with the broker's defaults.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from streams.broker.access import KafkaAccessError
from streams.broker.acls import Acl, Deployment, acls_for, missing
from streams.broker.clients import kafka_admin
from streams.broker.compat import TOPICS_VISIBLE_WITHIN_S, start_whole
from streams.broker.permissions import allowed_operations
from streams.broker.refusals import admitted
from streams.errors import BrokerError, UsageError
from streams.settings import TOPIC_NAMES, Settings

# The lifecycle reads events partition p for commands partition p: the three must match.
CO_PARTITIONED = ("commands", "events", "snapshots")
# Keyed by request identity, job id, object or route checkpoint; only the latest record of a key matters.
COMPACTED = frozenset({"cache", "snapshots", "references", "routes", "controls"})
ROUTES_RETENTION_MS = 7 * 86_400_000
# The cleaner merges cleaned segments up to this size; a merged segment goes only once its newest
# record is past retention, so smaller ones let retention remove old reservations sooner.
ROUTES_SEGMENT_BYTES = str(64 * 1024 * 1024)
MAX_MESSAGE_BYTES = "1048588"  # what the publisher's batches are sized under (Kafka's default)


class TopicLayoutError(UsageError):
    """Topics scrapestream cannot run on: missing, or configured otherwise than the settings say."""


@dataclass(frozen=True)
class TopicSpec:
    name: str
    kind: str  # `submit`, `commands`, …; `due` for every job type's due topic
    partitions: int
    replication: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Found:
    """A topic as the cluster has it."""

    name: str
    partitions: int
    replication: int
    configs: dict[str, str]


def topic_specs(settings: Settings, runners: Iterable[str] = ()) -> list[TopicSpec]:
    """Every topic a deployment needs: the fixed ones and the due topic of each job type in `runners`."""
    names = {settings.topic(name): name for name in TOPIC_NAMES}
    names |= {settings.due_topic(runner): "due" for runner in sorted(set(runners))}
    return [_spec(settings, name, kind) for name, kind in names.items()]


def _spec(settings: Settings, name: str, kind: str) -> TopicSpec:
    # The route ledger's reservations have keys of their own: time retention removes them once a
    # checkpoint covers them (`streams/readers/ledger.py`), compaction keeps a route's latest checkpoint.
    policy = "compact,delete" if kind == "routes" else "compact" if kind in COMPACTED else "delete"
    configs = {
        "cleanup.policy": policy,
        "min.insync.replicas": str(settings.resolved_min_insync_replicas),
        "max.message.bytes": MAX_MESSAGE_BYTES,
    }
    if kind in COMPACTED:
        configs["segment.ms"] = str(settings.compacted_segment_ms)
        configs["min.cleanable.dirty.ratio"] = str(settings.compacted_dirty_ratio)
    if kind == "events" and settings.events_retention_hours > 0:
        # Recovery needs only the events after the latest snapshot mark (`streams/readers/snapshots.py`).
        configs["retention.ms"] = str(int(settings.events_retention_hours * 3_600_000))
    if kind == "routes":
        # A checkpoint is written again well within this, and a budget period stays whole.
        longest_s = max([route.period_s for route in settings.routes.values()], default=0)
        configs["retention.ms"] = str(max(ROUTES_RETENTION_MS, 2 * longest_s * 1000))
        configs["segment.bytes"] = ROUTES_SEGMENT_BYTES
    return TopicSpec(name, kind, settings.partitions, settings.replication_factor, configs)


def problems(specs: Sequence[TopicSpec], found: dict[str, Found]) -> list[str]:
    """Each way the topics differ from what the settings say, one line per topic and fault."""
    lines = []
    for spec in specs:
        have = found.get(spec.name)
        if have is None:
            lines.append(f"{spec.name}: missing")
            continue
        if have.partitions != spec.partitions:
            lines.append(
                f"{spec.name}: {have.partitions} partitions, SCRAPESTREAM_PARTITIONS says {spec.partitions}"
            )
        if have.replication < spec.replication:
            lines.append(
                f"{spec.name}: replication factor {have.replication}, "
                f"SCRAPESTREAM_REPLICATION_FACTOR says {spec.replication}"
            )
        for key, wanted in spec.configs.items():
            if have.configs.get(key) != wanted:
                lines.append(f"{spec.name}: {key} is {have.configs.get(key, 'unset')!r}, not {wanted!r}")
    counts = {
        have.partitions for spec in specs if spec.kind in CO_PARTITIONED and (have := found.get(spec.name))
    }
    if len(counts) > 1:
        lines.append(
            f"commands, events and snapshots must have equal partition counts, found {sorted(counts)}"
        )
    return lines


async def inspect(settings: Settings, names: Iterable[str]) -> dict[str, Found]:
    """The named topics that exist, with their partitions, replication factor and configs."""
    async with _admin(settings) as admin:
        existing = set(await admin.list_topics())
        present = [name for name in names if name in existing]
        if not present:
            return {}
        described = await admin.describe_topics(present)
        configs = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name) for name in present]
        )
    settings_of: dict[str, dict[str, str]] = {}
    for response in configs:
        for resource in response.resources:
            name, entries = resource[3], resource[4]
            settings_of[name] = {entry[0]: entry[1] for entry in entries if entry[1] is not None}
    return {
        topic["topic"]: Found(
            name=topic["topic"],
            partitions=len(topic["partitions"]),
            replication=min((len(p["replicas"]) for p in topic["partitions"]), default=0),
            configs=settings_of.get(topic["topic"], {}),
        )
        for topic in described
    }


async def create_missing(settings: Settings, specs: Sequence[TopicSpec]) -> list[str]:
    """Creates the topics of `specs` that do not exist; returns their names."""
    found = await inspect(settings, [spec.name for spec in specs])
    missing = [spec for spec in specs if spec.name not in found]
    if missing:
        async with _admin(settings) as admin:
            new = [NewTopic(s.name, s.partitions, s.replication, topic_configs=s.configs) for s in missing]
            with contextlib.suppress(TopicAlreadyExistsError):  # another worker created them first
                await admin.create_topics(new)
        await _visible(settings, [spec.name for spec in missing])
    return [spec.name for spec in missing]


async def _visible(settings: Settings, names: list[str]) -> None:
    """Waits (a while) until every broker asked describes the new topics: on a cluster, the
    controller has them before the broker that answers the next metadata request does."""
    loop = asyncio.get_running_loop()
    give_up_at = loop.time() + TOPICS_VISIBLE_WITHIN_S
    while loop.time() < give_up_at:
        found = await inspect(settings, names)
        if all(name in found and "cleanup.policy" in found[name].configs for name in names):
            return
        await asyncio.sleep(0.2)


async def ensure_topics(settings: Settings, runners: Iterable[str] = ()) -> None:
    """Refuses (`TopicLayoutError`) to run on topics that are missing or differ from the settings;
    with `SCRAPESTREAM_CREATE_TOPICS` the missing ones are created first."""
    specs = topic_specs(settings, runners)
    lacking = await worker_missing_acls(settings, [spec.name for spec in specs])
    if lacking:
        who = settings.kafka_access.principal
        raise KafkaAccessError(
            f"{who} lacks ACLs a worker needs: {'; '.join(acl.line() for acl in lacking)} (create them with "
            f"`scrapestream acls --role worker --principal {who} --apply` as an administrator, or check "
            "SCRAPESTREAM_KAFKA_SASL_USERNAME)"
        )
    if settings.create_topics:
        await create_missing(settings, specs)
    faults = problems(specs, await inspect(settings, [spec.name for spec in specs]))
    if faults:
        raise TopicLayoutError(
            "the topics are not as the settings say:\n  "
            + "\n  ".join(faults)
            + "\nrun `scrapestream topics create` (it creates what is missing), or change the topics or "
            "the settings to agree"
        )


@contextlib.asynccontextmanager
async def _admin(settings: Settings) -> AsyncIterator[AIOKafkaAdminClient]:
    await admitted(settings.kafka_access)
    admin = kafka_admin(settings.kafka_access)
    try:
        await start_whole(admin.start, admin.close)
    except KafkaError as exc:
        await admin.close()
        raise BrokerError(f"cannot reach Kafka at {settings.kafka_bootstrap}: {exc}") from exc
    try:
        yield admin
    finally:
        await admin.close()


def deployment_of(settings: Settings, job_types: list[str], group_prefix: str | None = None) -> Deployment:
    return Deployment(
        settings.topic_prefix,
        settings.consumer_group,
        settings.create_topics,
        tuple(settings.due_topic(job_type) for job_type in job_types),
        group_prefix,
    )


async def worker_missing_acls(settings: Settings, topics: list[str]) -> list[Acl]:
    """The `worker` ACLs this process's own principal lacks on `topics` and its group; none to check
    where it logs in as no named principal (an open cluster, or mutual TLS)."""
    principal = settings.kafka_access.principal
    if principal is None:
        return []
    needed = acls_for("worker", principal, deployment_of(settings, []))
    allowed = await allowed_operations(settings.kafka_access, topics, settings.consumer_group)
    return missing(needed, allowed)
