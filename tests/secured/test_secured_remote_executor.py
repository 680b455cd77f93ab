"""A remote executor on the secured cluster, logged in as its own principal with only the
`remote-executor` ACLs of its type: it reads its type's due topic, reports through the submit topic,
and its job completes; it can read no other type's work."""

from __future__ import annotations

from uuid import uuid4

import pytest
from aiokafka.errors import TopicAuthorizationFailedError

from bench.kafka import KafkaCluster
from schemas.enums import JobStatus
from streams.broker.clients import kafka_consumer
from tests import brokers
from tests.e2e.test_remote_executor import deployed, outside_executor, remote_job
from tests.secured.harness import made
from tests.secured.test_secured_cluster import read_some

# every type the test plugins register: the worker refuses to start while a type's due topic is missing
PLUGIN_TYPES = (
    "test.remote",
    "test.broken-profile",
    "test.echo",
    "test.keeper",
    "test.plain",
    "test.refusing",
    "test.sleeper",
    "test.sleeper-once",
)

pytestmark = [
    pytest.mark.asyncio(loop_scope="function"),
    pytest.mark.xdist_group("kafka"),
    pytest.mark.timeout(300),
]


async def test_a_remote_executor_runs_its_type_with_its_roles_acls_alone(
    secured_kafka: KafkaCluster, tmp_path, monkeypatch
):
    deployment = await made(secured_kafka, f"r{uuid4().hex[:8]}", *PLUGIN_TYPES)
    await deployment.grant("worker", "worker")
    await deployment.grant("remote-executor", "executor", "--type", "test.remote")
    secured = deployment.secured
    login = {
        "SECURITY_PROTOCOL": "SASL_SSL",
        "SASL_MECHANISM": "SCRAM-SHA-512",
        "SASL_USERNAME": "executor",
        "SASL_PASSWORD": secured.users["executor"],
        "SSL_CA_FILE": str(secured.ca.ca_file),
        "GROUP": f"executor.{deployment.prefix}",
    }
    broker = brokers.TestBroker("kafka", secured_kafka.bootstrap)
    worker = deployment.settings("worker", create_topics=False)
    async with deployed(broker, tmp_path, monkeypatch, **worker) as run:
        executor = outside_executor(run.settings, run.result_schema, **login)
        async with executor:
            job_id = await run.client.submit(remote_job("https://remote.example/good/Secured"))
            completion = await run.system.completion(job_id)
    assert completion.status is JobStatus.SUCCEEDED
    with pytest.raises(TopicAuthorizationFailedError):  # the http.fetch due topic is not its work
        await read_some(kafka_consumer(deployment.access("executor"), f"{deployment.prefix}.due"))
