"""Other teams' own clients (Java, Python, Node) on the secured cluster, each logging in as the team's
SCRAM principal with only the `producer` and `consumer` ACLs `scrapestream acls` gives it: they submit
signed, match every answer, read their completion and fetch its artifact, as on an open cluster."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from uuid import uuid4

import pytest
import pytest_asyncio

from bench.kafka import KafkaCluster
from tests.clients import INTEROP
from tests.e2e.cluster import auth_on
from tests.e2e.conftest import System, running_system
from tests.interop.test_foreign_clients import assert_answered_and_completed, client_env, run_client
from tests.secured.harness import Deployment, made

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.xdist_group("kafka"),
    pytest.mark.timeout(600),
]
TEAM = "team"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def deployment(secured_kafka: KafkaCluster) -> Deployment:
    deployment = await made(secured_kafka, f"c{uuid4().hex[:8]}")
    await deployment.grant("worker", "worker")
    await deployment.grant("producer", TEAM)
    await deployment.grant("consumer", TEAM)
    return deployment


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[System]:
    """A worker with auth on (signed commands), logged in as `worker`."""
    login = deployment.settings("worker", create_topics=False, deployment_id="secured-interop")
    settings = auth_on(deployment.cluster.bootstrap, tmp_path_factory.mktemp("secured-interop"), **login)
    async with running_system(settings) as running:
        yield running


def team_env(system: System, deployment: Deployment, origin, name: str) -> dict[str, str]:
    secured = deployment.secured
    return client_env(system, origin, name) | {
        "SECURITY_PROTOCOL": "SASL_SSL",
        "SASL_MECHANISM": "SCRAM-SHA-512",
        "SASL_USERNAME": TEAM,
        "SASL_PASSWORD": secured.users[TEAM],
        "SSL_CA_FILE": str(secured.ca.ca_file),
        "GROUP_PREFIX": f"{TEAM}.",
    }


async def test_a_java_team_does_it_as_its_own_principal(
    system: System, deployment: Deployment, origin, java_client
):
    seen = await run_client([*java_client, "client"], team_env(system, deployment, origin, "java"))
    assert_answered_and_completed(seen, "java")


async def test_a_python_team_does_it_as_its_own_principal(system: System, deployment: Deployment, origin):
    client = [sys.executable, str(INTEROP / "python_client.py")]
    seen = await run_client(client, team_env(system, deployment, origin, "python"))
    assert_answered_and_completed(seen, "python")


async def test_a_node_team_does_it_as_its_own_principal(
    system: System, deployment: Deployment, origin, node_client
):
    seen = await run_client([*node_client, "client"], team_env(system, deployment, origin, "node"))
    assert_answered_and_completed(seen, "node")
