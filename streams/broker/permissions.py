"""ACLs on the cluster: creating a role's (`scrapestream acls --apply`), and asking what this client's
own principal may do (`topics check`), which needs no right to read ACLs: the broker tells any
client the operations it is allowed on the topics and groups it names (Metadata v8, DescribeGroups v3).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeAlias

from aiokafka import errors
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.admin import CreateAclsRequest
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import Array, Boolean, Bytes, Int16, Int32, Schema, String

from streams.broker.access import KafkaAccess, KafkaAccessError
from streams.broker.acls import (
    ALLOW,
    OPERATION_CODES,
    PATTERN_CODES,
    RESOURCE_CODES,
    Acl,
    Operation,
    ResourceType,
)
from streams.broker.clients import kafka_admin
from streams.broker.compat import start_whole
from streams.broker.refusals import admitted

TEXT = String("utf-8")
UNKNOWN_TOPIC = 3
GROUP_DENIED = 30


class _AuthorizedMetadataResponse(Response):  # type: ignore[misc]
    API_KEY = 3
    API_VERSION = 8
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "brokers",
            Array(("node_id", Int32), ("host", String("utf-8")), ("port", Int32), ("rack", String("utf-8"))),
        ),
        ("cluster_id", String("utf-8")),
        ("controller_id", Int32),
        (
            "topics",
            Array(
                ("error_code", Int16),
                ("name", String("utf-8")),
                ("is_internal", Boolean),
                (
                    "partitions",
                    Array(
                        ("error_code", Int16),
                        ("partition_index", Int32),
                        ("leader_id", Int32),
                        ("leader_epoch", Int32),
                        ("replica_nodes", Array(Int32)),
                        ("isr_nodes", Array(Int32)),
                        ("offline_replicas", Array(Int32)),
                    ),
                ),
                ("topic_authorized_operations", Int32),
            ),
        ),
        ("cluster_authorized_operations", Int32),
    )


class _AuthorizedMetadataRequestV8(RequestStruct):  # type: ignore[misc]
    API_KEY = 3
    API_VERSION = 8
    RESPONSE_TYPE = _AuthorizedMetadataResponse
    SCHEMA = Schema(
        ("topics", Array(String("utf-8"))),
        ("allow_auto_topic_creation", Boolean),
        ("include_cluster_authorized_operations", Boolean),
        ("include_topic_authorized_operations", Boolean),
    )


_Structs: TypeAlias = _AuthorizedMetadataRequestV8


class AuthorizedMetadataRequest(Request[_Structs]):  # type: ignore[misc]
    """Metadata of named topics with the operations the asking principal may do on each."""

    API_KEY = 3

    def __init__(self, topics: list[str]) -> None:
        self._topics = topics

    def build(self, request_struct_class: type[_Structs]) -> _Structs:
        return request_struct_class(self._topics, False, False, True)


class _AuthorizedGroupResponse(Response):  # type: ignore[misc]
    API_KEY = 15
    API_VERSION = 3
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "groups",
            Array(
                ("error_code", Int16),
                ("group", TEXT),
                ("state", TEXT),
                ("protocol_type", TEXT),
                ("protocol", TEXT),
                (
                    "members",
                    Array(
                        ("member_id", TEXT),
                        ("client_id", TEXT),
                        ("client_host", TEXT),
                        ("metadata", Bytes),
                        ("assignment", Bytes),
                    ),
                ),
                ("authorized_operations", Int32),
            ),
        ),
    )


class _AuthorizedGroupRequestV3(RequestStruct):  # type: ignore[misc]
    """aiokafka's own v3 reads the answer with v2's schema, which drops the authorized operations."""

    API_KEY = 15
    API_VERSION = 3
    RESPONSE_TYPE = _AuthorizedGroupResponse
    SCHEMA = Schema(("groups", Array(TEXT)), ("include_authorized_operations", Boolean))


class AuthorizedGroupRequest(Request[_AuthorizedGroupRequestV3]):  # type: ignore[misc]
    """A description of named groups with the operations the asking principal may do on each."""

    API_KEY = 15

    def __init__(self, groups: list[str]) -> None:
        self._groups = groups

    def build(self, request_struct_class: type[_AuthorizedGroupRequestV3]) -> _AuthorizedGroupRequestV3:
        return request_struct_class(self._groups, True)


Allowed: TypeAlias = dict[tuple[ResourceType, str], frozenset[Operation]]


def _operations(bits: int) -> frozenset[Operation]:
    return frozenset(
        operation for operation, code in OPERATION_CODES.items() if bits >= 0 and bits & (1 << code)
    )


async def allowed_operations(access: KafkaAccess, topics: Iterable[str], group: str) -> Allowed:
    """Each named topic, and the group, with what this client's principal may do there (nothing where
    it may not even describe it)."""
    await admitted(access)
    admin = kafka_admin(access)
    await start_whole(admin.start, admin.close)
    try:
        answer: Any = await admin._send_request(AuthorizedMetadataRequest(sorted(topics)))
        found: Allowed = {
            ("TOPIC", name): _operations(bits) if code == 0 else frozenset()
            for code, name, _, _, bits in answer.topics
            if code != UNKNOWN_TOPIC  # one it may describe that is not there: the layout check's to say
        }
        return found | await _group_operations(admin, group)
    finally:
        await admin.close()


async def _group_operations(admin: AIOKafkaAdminClient, group: str) -> Allowed:
    """The group's operations; none where it may not even describe it; left out (not known) for a
    group that does not exist yet."""
    try:
        coordinator = await admin.find_coordinator(group)
        answer: Any = await admin._send_request(AuthorizedGroupRequest([group]), coordinator)
    except errors.GroupAuthorizationFailedError:
        return {("GROUP", group): frozenset()}
    except errors.KafkaError:
        return {}
    ((code, _, _, _, _, _, bits),) = answer.groups
    if code == GROUP_DENIED:
        return {("GROUP", group): frozenset()}
    return {("GROUP", group): _operations(bits)} if code == 0 and bits >= 0 else {}


async def create_acls(access: KafkaAccess, acls: Iterable[Acl]) -> None:
    """Creates each ACL (one that exists already is left as it is); the first refusal is raised."""
    await admitted(access)
    admin = kafka_admin(access)
    await start_whole(admin.start, admin.close)
    try:
        for acl in acls:
            request = CreateAclsRequest(
                RESOURCE_CODES[acl.resource_type],
                acl.name,
                PATTERN_CODES[acl.pattern],
                acl.principal,
                acl.host,
                OPERATION_CODES[acl.operation],
                ALLOW,
            )
            answer: Any = await admin._send_request(request)
            ((code, message),) = answer.creation_responses
            if code != 0:
                raise KafkaAccessError(_refused(access, acl, errors.for_code(code), message))
    finally:
        await admin.close()


def _refused(access: KafkaAccess, acl: Acl, kind: type[errors.KafkaError], message: str | None) -> str:
    who = access.principal or "this command's principal"
    if kind is errors.ClusterAuthorizationFailedError:
        return (
            f"{who} may not create ACLs (it needs ALTER on the cluster): run `scrapestream acls --apply` "
            "with SCRAPESTREAM_KAFKA_SASL_USERNAME (or the client certificate) of an administrator"
        )
    return f"the cluster refused `{acl.line()}`: {kind.__name__} {message or ''}".rstrip()
