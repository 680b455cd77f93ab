"""Without the allow setting, a target on a private address is refused before any connection."""

import pytest
import pytest_asyncio

from schemas.enums import JobStatus
from tests.e2e.conftest import running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(broker, tmp_path_factory):
    settings = worker_settings(
        broker.bootstrap, tmp_path_factory.mktemp("guarded"), allow_private_networks=False
    )
    async with running_system(settings) as running:
        yield running


async def test_a_target_resolving_to_loopback_is_refused_and_dead_lettered(system, origin):
    job_id = await system.submit(f"http://localhost:{origin.port}/page/private")
    completion = await system.completion(job_id)
    assert completion.status is JobStatus.DEAD_LETTER
    assert completion.attempt_count == 1
    assert completion.failure.code == "ADDRESS_REFUSED"
    assert "127.0.0.1" in completion.failure.safe_message
    assert origin.hits["/page/private"] == 0
