"""Which worker answers for which job: the group's assignment carries every worker's HTTP address.

Each member puts its advertised URL in its subscription; the group leader assigns partitions
topic by topic (Kafka's range assignment) and hands every member the whole table: the owner
of each commands partition (the lifecycle that keeps those jobs) and the list of peers. This
is how Kafka Streams' interactive queries and Faust's table routing find a key's owner.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

log = logging.getLogger(__name__)


@dataclass
class Routing:
    """The latest table this worker was handed; `owners` maps commands partitions to HTTP base URLs."""

    own_url: str
    owners: dict[int, str] = field(default_factory=dict)
    peers: tuple[str, ...] = ()
    generation: int = 0
    assigned: dict[str, frozenset[int]] | None = None  # every topic's partitions some member holds

    def owner_of(self, partition: int) -> str | None:
        return self.owners.get(partition)

    def unowned(self, partitions: Mapping[str, Iterable[int]]) -> dict[str, list[int]]:
        """Of `partitions` (per topic, as the cluster has them), those no member of the group holds;
        nothing is known (so nothing is said) before the group's leader handed out a table."""
        if self.assigned is None:
            return {}
        missing = {
            topic: sorted(set(numbers) - self.assigned.get(topic, frozenset()))
            for topic, numbers in partitions.items()
        }
        return {topic: numbers for topic, numbers in missing.items() if numbers}

    def everyone(self) -> tuple[str, ...]:
        """Every worker's URL, this one's first (so it answers its own share without a round trip)."""
        others = tuple(url for url in self.peers if url != self.own_url)
        return (self.own_url, *others)

    def update(self, table: Mapping[str, Any]) -> None:
        """Take a table handed out by the group's leader; raises on one that is not a routing table."""
        owners = table.get("commands", {})
        found = {int(partition): str(url) for partition, url in owners.items()}
        assigned = table.get("assigned")
        self.peers = tuple(str(url) for url in table.get("peers", ()))
        self.owners = found
        self.assigned = (
            None
            if assigned is None
            else {str(topic): frozenset(int(p) for p in partitions) for topic, partitions in assigned.items()}
        )
        self.generation += 1
        log.info(
            "routing table %d: %d partitions over %d workers",
            self.generation,
            len(self.owners),
            len(self.peers),
        )


class RoutingAssignor:
    """An aiokafka partition assignor (range per topic) that also distributes the routing table."""

    name = "scrapestream-routing"
    version = 0

    def __init__(self, routing: Routing, commands_topic: str) -> None:
        self._routing = routing
        self._commands_topic = commands_topic

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        url = json.dumps({"url": self._routing.own_url}).encode()
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), url)

    def assign(
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        assigned = RangePartitionAssignor.assign(cluster, members)
        urls = {member: _url_of(metadata.user_data) for member, metadata in members.items()}
        owners = {
            str(partition): urls[member]
            for member, assignment in assigned.items()
            for topic, partitions in assignment.assignment
            if topic == self._commands_topic
            for partition in partitions
        }
        peers = sorted({url for url in urls.values() if url})
        every: dict[str, list[int]] = {}
        for assignment in assigned.values():
            for topic, partitions in assignment.assignment:
                every.setdefault(topic, []).extend(partitions)
        table = json.dumps({"commands": owners, "peers": peers, "assigned": every}).encode()
        return {
            member: ConsumerProtocolMemberAssignment(assignment.version, assignment.assignment, table)
            for member, assignment in assigned.items()
        }

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        try:
            table = json.loads(assignment.user_data or b"{}")
            self._routing.update(table)
        except (ValueError, TypeError, AttributeError) as exc:  # a member of another kind leads the group
            log.warning(
                "the group's assignment carries no usable routing table (%s); key lookups stay local", exc
            )


def _url_of(user_data: bytes | None) -> str:
    try:
        return str(json.loads(user_data or b"{}").get("url", ""))
    except (ValueError, AttributeError):
        return ""  # a member of another version: it owns partitions but answers no queries
