"""Topics are provisioned, never left for a client to auto-create: `scrapestream topics` creates,
checks and describes them, and a worker refuses a layout that differs from its settings."""

from __future__ import annotations

from uuid import uuid4

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from streams.runtime.topics import create_missing, inspect, topic_specs
from streams.settings import load_settings
from tests.commands import run

pytestmark = pytest.mark.asyncio(loop_scope="module")


def settings_for(broker, prefix: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {
        "kafka_bootstrap": broker.bootstrap,
        "broker_profile": broker.profile_name,
        "topic_prefix": prefix,
        "group_id": prefix,
        "partitions": "2",
        "auth_enabled": "false",
        "web_port": "0",
    }


async def test_create_makes_every_topic_as_the_settings_say_and_check_then_passes(broker, tmp_path):
    environment = settings_for(broker, f"t{uuid4().hex[:8]}")
    code, output = await run("topics", "check", cwd=tmp_path, **environment)
    assert code == 1
    assert f"{environment['topic_prefix']}.events: missing" in output
    code, output = await run("topics", "create", cwd=tmp_path, **environment)
    assert code == 0, output
    assert f"created {environment['topic_prefix']}.cache" in output
    code, output = await run("topics", "check", cwd=tmp_path, **environment)
    assert code == 0, output
    assert output.strip().endswith("topics are as the settings say")
    settings = load_settings(**environment)
    found = await inspect(settings, [spec.name for spec in topic_specs(settings)])
    assert found[settings.topic("cache")].configs["cleanup.policy"] == "compact"
    assert found[settings.topic("routes")].configs["cleanup.policy"] == "compact,delete"
    assert found[settings.topic("routes")].configs["segment.bytes"] == str(64 * 1024 * 1024)
    assert found[settings.topic("events")].configs["retention.ms"] == str(168 * 3_600_000)
    code, output = await run("topics", "describe", cwd=tmp_path, **environment)
    assert code == 0
    assert f"{settings.topic('snapshots')}: 2 partitions, replication 1, cleanup.policy=compact" in output


async def test_a_missing_topic_and_a_wrong_cleanup_policy_are_both_named_by_check_and_by_the_worker(
    broker, tmp_path
):
    environment = settings_for(broker, f"t{uuid4().hex[:8]}")
    settings = load_settings(**environment)
    cache, routes = settings.topic("cache"), settings.topic("routes")
    await create_missing(
        settings, [spec for spec in topic_specs(settings) if spec.name not in (cache, routes)]
    )
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:  # the cache as a broker's defaults would make it: deleted by time, never compacted
        await admin.create_topics([NewTopic(cache, 2, 1, topic_configs={"cleanup.policy": "delete"})])
    finally:
        await admin.close()
    faults = [f"{routes}: missing", f"{cache}: cleanup.policy is 'delete', not 'compact'"]

    code, output = await run("topics", "check", cwd=tmp_path, **environment)
    assert code == 1
    for fault in faults:
        assert fault in output
    code, output = await run("worker", cwd=tmp_path, data_dir=str(tmp_path / "worker"), **environment)
    assert code == 2
    for fault in faults:
        assert fault in output
    assert "scrapestream topics create" in output
    assert "Traceback" not in output
    # Nothing was created behind the operator's back.
    assert routes not in await inspect(settings, [routes])
