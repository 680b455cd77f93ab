"""Each public topic's schema changes keep the compatibility rule the topic promises, checked by a real
schema registry against every version frozen in `schemas/avsc/history/`; a worker will not start
on a registry whose subjects the current schemas would break."""

from __future__ import annotations

import json
from uuid import uuid4

import httpx
import pytest

from schemas.contract import BEFORE_THE_PROMISE, PUBLIC_TOPICS
from schemas.registry import current_schemas, writer_schemas
from streams.runtime.schema_registry import SchemaRegistry, SchemaRegistryError, register_contract
from streams.settings import load_settings

pytestmark = pytest.mark.xdist_group(
    "kafka"
)  # the process that starts the session's registry for the interop tests

CHECKS = [
    (contract.topic, record, contract.compatibility)
    for contract in PUBLIC_TOPICS
    for record in contract.records
]


def compatible(registry: str, older: dict, newer: dict, rule: str) -> dict:
    """The registry's verdict on `newer` following `older` under `rule` (the pairwise, transitive check)."""
    subject = f"check-{uuid4().hex}"
    with httpx.Client(base_url=registry, timeout=30) as http:
        http.put(
            f"/config/{subject}", json={"compatibility": rule.removesuffix("_TRANSITIVE")}
        ).raise_for_status()
        http.post(f"/subjects/{subject}/versions", json={"schema": json.dumps(older)}).raise_for_status()
        answer = http.post(
            f"/compatibility/subjects/{subject}/versions/latest",
            json={"schema": json.dumps(newer)},
            params={"verbose": "true"},
        )
        answer.raise_for_status()
        return answer.json()


@pytest.mark.parametrize(("topic", "record", "rule"), CHECKS)
def test_the_current_schema_keeps_the_topic_rule_with_every_frozen_version(
    schema_registry, topic, record, rule
):
    current = current_schemas()[record]
    frozen = [
        schema
        for schema in writer_schemas().values()
        if schema.name == record
        and schema.fingerprint != current.fingerprint
        and f"{record}.{schema.fingerprint.hex()}" not in BEFORE_THE_PROMISE
    ]
    refused = {
        schema.fingerprint.hex(): verdict
        for schema in frozen
        if not (verdict := compatible(schema_registry, schema.standalone, current.standalone, rule))[
            "is_compatible"
        ]
    }
    assert not refused, f"{record} on {topic} breaks {rule}"


def test_the_check_refuses_a_change_that_breaks_a_rule(schema_registry):
    current = current_schemas()["SubmitJob"].standalone
    required = {"name": "tenant", "type": "string"}  # old producers never wrote it: workers cannot read them
    broken = {**current, "fields": [*current["fields"], required]}
    assert not compatible(schema_registry, current, broken, "BACKWARD_TRANSITIVE")["is_compatible"]
    answer = current_schemas()["SubmissionAnswer"].standalone
    dropped = {**answer, "fields": [f for f in answer["fields"] if f["name"] != "source_offset"]}
    assert not compatible(schema_registry, answer, dropped, "FORWARD_TRANSITIVE")["is_compatible"]


async def test_a_worker_does_not_register_a_change_its_subjects_refuse(schema_registry, tmp_path):
    settings = load_settings(
        kafka_bootstrap="127.0.0.1:9",
        data_dir=tmp_path,
        topic_prefix=f"t{uuid4().hex[:8]}",
        schema_registry_url=schema_registry,
    )
    completed = current_schemas()["JobCompleted"].standalone
    # Consumers already read completions with a field no current completion carries.
    older = {**completed, "fields": [*completed["fields"], {"name": "region", "type": "string"}]}
    subject = f"{settings.topic('completions')}-value"
    async with httpx.AsyncClient(base_url=schema_registry) as http:
        (
            await http.put(f"/config/{subject}", json={"compatibility": "FORWARD_TRANSITIVE"})
        ).raise_for_status()
        (
            await http.post(f"/subjects/{subject}/versions", json={"schema": json.dumps(older)})
        ).raise_for_status()
    registry = SchemaRegistry(schema_registry)
    try:
        with pytest.raises(SchemaRegistryError, match=f"{subject}: this version's schema breaks"):
            await register_contract(settings, registry)
    finally:
        await registry.close()


async def test_an_unreachable_registry_stops_the_start_with_its_address(tmp_path):
    url = "http://reader:hunter2@127.0.0.1:9/apis/ccompat/v7"
    settings = load_settings(data_dir=tmp_path, schema_registry_url=url)
    registry = SchemaRegistry.of(settings)
    assert registry is not None
    try:
        with pytest.raises(
            SchemaRegistryError, match=r"127\.0\.0\.1:9.*does not start without its registry"
        ) as refused:
            await register_contract(settings, registry)
        assert "hunter2" not in str(refused.value)
    finally:
        await registry.close()
