"""The Kafka ACLs each role needs on a deployment, and nothing more.

`worker`: every topic of the prefix (read, write, and describe their configs to check them), its
consumer group, and the transactional ids of `exactly_once` (`<group>.<topic>.<partition>`).
`producer`: writes the submit topic, reads its answers and the completions. `consumer`: reads
completions, changes and answers. `remote-executor`: reads its job types' due topics, writes the
submit topic (its reports) and reads the answers. Outside roles read in groups of their own prefix.
Roles that produce from outside may write idempotently (the one cluster-wide grant); creating topics
and ACLs is an administrator's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["worker", "producer", "consumer", "remote-executor"]
ROLES: tuple[Role, ...] = ("worker", "producer", "consumer", "remote-executor")
ResourceType = Literal["TOPIC", "GROUP", "TRANSACTIONAL_ID", "CLUSTER"]
Pattern = Literal["LITERAL", "PREFIXED"]
Operation = Literal["READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"]

# Kafka's wire codes (org.apache.kafka.common.acl / resource).
RESOURCE_CODES: dict[ResourceType, int] = {"TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5}
PATTERN_CODES: dict[Pattern, int] = {"LITERAL": 3, "PREFIXED": 4}
OPERATION_CODES: dict[Operation, int] = {
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DESCRIBE": 8,
    "DESCRIBE_CONFIGS": 10,
    "IDEMPOTENT_WRITE": 12,
}
CLUSTER = "kafka-cluster"  # the one name Kafka gives its cluster resource
ALLOW = 3


@dataclass(frozen=True, order=True)
class Acl:
    resource_type: ResourceType
    pattern: Pattern
    name: str
    operation: Operation
    principal: str
    host: str = "*"

    def covers(self, resource_type: ResourceType, name: str) -> bool:
        if resource_type != self.resource_type:
            return False
        return name == self.name if self.pattern == "LITERAL" else name.startswith(self.name)

    def line(self) -> str:
        return f"ALLOW {self.principal} {self.operation} {self.resource_type} {self.pattern} {self.name}"


@dataclass(frozen=True)
class Deployment:
    """What the ACLs of a role name: the topic prefix, the workers' group, the topics outside roles
    may touch, whether the worker creates topics, and an outside principal's group prefix."""

    topic_prefix: str
    consumer_group: str
    creates_topics: bool = False
    due_topics: tuple[str, ...] = ()  # a remote executor's job types' due topics
    group_prefix: str | None = None  # None: the principal's name followed by a dot

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}.{name}"


def acls_for(role: Role, principal: str, deployment: Deployment) -> list[Acl]:
    """The ACLs `principal` (`User:NAME`) needs to act as `role` on `deployment`, in a stable order."""
    topics = {
        "worker": _worker_topics,
        "producer": _producer_topics,
        "consumer": _consumer_topics,
        "remote-executor": _executor_topics,
    }[role](deployment)
    found = [Acl(kind, pattern, name, operation, principal) for kind, pattern, name, operation in topics]
    if role == "worker":
        found.append(Acl("GROUP", "LITERAL", deployment.consumer_group, "READ", principal))
        for operation in ("WRITE", "DESCRIBE"):
            found.append(
                Acl("TRANSACTIONAL_ID", "PREFIXED", f"{deployment.consumer_group}.", operation, principal)
            )
    else:
        if role != "consumer":  # an idempotent producer: Kafka asks it of aiokafka's InitProducerId
            found.append(Acl("CLUSTER", "LITERAL", CLUSTER, "IDEMPOTENT_WRITE", principal))
        name = principal.partition(":")[2] or principal
        group_prefix = deployment.group_prefix if deployment.group_prefix is not None else f"{name}."
        found.append(Acl("GROUP", "PREFIXED", group_prefix, "READ", principal))
    return sorted(set(found))


Grant = tuple[ResourceType, Pattern, str, Operation]


def _worker_topics(deployment: Deployment) -> list[Grant]:
    operations: list[Operation] = ["READ", "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS"]
    if deployment.creates_topics:
        operations.append("CREATE")
    return [("TOPIC", "PREFIXED", f"{deployment.topic_prefix}.", operation) for operation in operations]


def _reads(*topics: str) -> list[Grant]:
    return [("TOPIC", "LITERAL", topic, operation) for topic in topics for operation in ("READ", "DESCRIBE")]


def _writes(topic: str) -> list[Grant]:
    return [("TOPIC", "LITERAL", topic, "WRITE"), ("TOPIC", "LITERAL", topic, "DESCRIBE")]


def _producer_topics(deployment: Deployment) -> list[Grant]:
    return _writes(deployment.topic("submit")) + _reads(
        deployment.topic("answers"), deployment.topic("completions")
    )


def _consumer_topics(deployment: Deployment) -> list[Grant]:
    return _reads(deployment.topic("completions"), deployment.topic("changes"), deployment.topic("answers"))


def _executor_topics(deployment: Deployment) -> list[Grant]:
    return _writes(deployment.topic("submit")) + _reads(deployment.topic("answers"), *deployment.due_topics)


def missing(needed: list[Acl], allowed: dict[tuple[ResourceType, str], frozenset[Operation]]) -> list[Acl]:
    """The needed ACLs whose operation the cluster does not allow on every resource it names that
    was checked (`allowed`: each checked resource with the operations the principal may do there)."""
    return [
        acl
        for acl in needed
        if any(acl.covers(kind, name) and acl.operation not in ops for (kind, name), ops in allowed.items())
    ]
