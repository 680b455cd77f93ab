"""Two workers in one group share the partitions; every job still finishes exactly once."""

import pytest

from schemas.enums import JobStatus
from schemas.events import JobCancelled, JobDeadLettered, JobSucceeded
from streams.worker import Worker
from tests.e2e.conftest import running_system, settled_ownership, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")
JOBS = 20
TERMINAL = (JobSucceeded, JobDeadLettered, JobCancelled)


async def test_two_workers_split_the_partitions_and_finish_every_job_once(broker, origin, tmp_path):
    settings = worker_settings(broker.bootstrap, tmp_path / "a", partitions=4)
    async with running_system(settings) as system:
        second = Worker(settings.model_copy(update={"data_dir": tmp_path / "b"}))
        await second.start()
        try:
            job_ids = [await system.submit(origin.url(f"/page/pair-{n}")) for n in range(JOBS)]
            for job_id in job_ids:
                assert (await system.completion(job_id)).status is JobStatus.SUCCEEDED
            await system.events.wait_for(lambda events: sum(isinstance(e, TERMINAL) for e in events) >= JOBS)
            owned = await settled_ownership(system.worker, second)
        finally:
            await second.stop()
        assert sorted(owned[0] + owned[1]) == [0, 1, 2, 3]
        assert owned[0]
        assert owned[1]
        for job_id in job_ids:
            assert len(system.completions.of_job(job_id)) == 1
            assert sum(isinstance(e, TERMINAL) for e in system.events.of_job(job_id)) == 1
