"""The origin the foreign clients' jobs fetch from (the end-to-end tests' own), and a deployment with
auth on for them."""

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.clients import java_client, node_client  # noqa: F401 - fixtures, shared
from tests.e2e.cluster import auth_on
from tests.e2e.conftest import (
    System,
    origin,  # noqa: F401 - a fixture, shared
    running_system,
)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def deployment(broker, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[System]:
    async with running_system(
        auth_on(broker.bootstrap, tmp_path_factory.mktemp("interop"), deployment_id="interop-tests")
    ) as system:
        yield system
