"""The group's routing table: who holds which partitions, and which partitions nobody holds."""

from __future__ import annotations

import json

from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

from streams.runtime.routing import Routing, RoutingAssignor

TOPICS = ["s.commands", "s.due", "s.due.browser.render"]


class Cluster:
    """What a group leader's metadata says of each topic's partitions."""

    def __init__(self, partitions: dict[str, set[int]]) -> None:
        self._partitions = partitions

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return self._partitions.get(topic)


def members(*urls: str) -> dict[str, ConsumerProtocolMemberMetadata]:
    return {
        f"member-{n}": ConsumerProtocolMemberMetadata(0, TOPICS, json.dumps({"url": url}).encode())
        for n, url in enumerate(urls)
    }


def test_a_topic_the_leaders_metadata_lacks_is_assigned_to_nobody_and_shows_as_unowned():
    # The race behind a browser.render job that never ran: the topic was created just before the
    # group's first join, and the leader's metadata did not list it yet.
    leader_saw = Cluster({"s.commands": {0, 1}, "s.due": {0, 1}})
    routing = Routing("http://a")
    assignor = RoutingAssignor(routing, "s.commands")
    assigned = assignor.assign(leader_saw, members("http://a", "http://b"))  # type: ignore[arg-type]
    assignor.on_assignment(next(iter(assigned.values())))
    every_partition = {"s.commands": {0, 1}, "s.due": {0, 1}, "s.due.browser.render": {0, 1}}
    assert routing.unowned(every_partition) == {"s.due.browser.render": [0, 1]}


def test_once_the_leader_sees_every_topic_nothing_is_unowned():
    cluster = {"s.commands": {0, 1}, "s.due": {0, 1}, "s.due.browser.render": {0, 1}}
    routing = Routing("http://a")
    assignor = RoutingAssignor(routing, "s.commands")
    assigned = assignor.assign(Cluster(cluster), members("http://a", "http://b"))  # type: ignore[arg-type]
    assignor.on_assignment(next(iter(assigned.values())))
    assert routing.unowned(cluster) == {}
    assert set(routing.owners) == {0, 1}


def test_before_any_table_nothing_is_said_and_a_table_of_another_kind_changes_nothing():
    routing = Routing("http://a")
    assert routing.unowned({"s.due": {0}}) == {}
    RoutingAssignor(routing, "s.commands").on_assignment(
        type("Assignment", (), {"user_data": b"[1, 2]"})()  # type: ignore[arg-type]
    )
    assert routing.generation == 0
