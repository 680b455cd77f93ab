"""Artifacts in a real S3-compatible server on loopback: stored with their metadata, read by any worker."""

from __future__ import annotations

from uuid import uuid4

import httpx
import pytest

from schemas.enums import CaptureMode, JobStatus
from streams.worker import Worker
from tests.e2e.conftest import running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_artifacts_land_in_the_bucket_and_any_worker_serves_them(broker, origin, s3, tmp_path):
    bucket = f"e2e-{uuid4().hex[:12]}"
    settings = worker_settings(broker.bootstrap, tmp_path / "a", partitions=4, **s3.settings(bucket))
    async with running_system(settings) as system:
        reader = Worker(settings.model_copy(update={"data_dir": tmp_path / "b", "executor_concurrency": 0}))
        await reader.start()
        try:
            job_id = await system.submit(origin.url("/page/s3"))
            completion = await system.completion(job_id)
            assert completion.status is JobStatus.SUCCEEDED
            (artifact,) = completion.artifacts
            # Where a consumer with its own S3 credentials reads it, as the completion says.
            assert artifact.location == f"s3://{bucket}/artifacts/{artifact.key}"
            located_bucket, located_key = artifact.location.removeprefix("s3://").split("/", 1)
            stored = s3.client().get_object(Bucket=located_bucket, Key=located_key)
            assert stored["Body"].read() == b"page /page/s3"
            assert stored["ContentType"] == artifact.content_type
            assert stored["Metadata"]["sha256"] == artifact.sha256
            assert not (tmp_path / "a" / "artifacts").exists()
            # The reader never fetched anything: it reads the bucket, not a peer's disk.
            for worker in (system.worker, reader):
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.web_port}") as http:
                    download = await http.get(f"/artifacts/{artifact.artifact_id}")
                    assert download.status_code == 200, download.text
                    assert download.content == b"page /page/s3"
            metadata_only = await system.submit(
                origin.url("/page/s3-meta"), capture_mode=CaptureMode.METADATA_ONLY
            )
            assert (await system.completion(metadata_only)).artifacts == ()
            listed = s3.client().list_objects_v2(Bucket=bucket)["KeyCount"]
            assert listed == 1
            s3.client().delete_object(Bucket=bucket, Key=f"artifacts/{artifact.key}")
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{reader.web_port}") as http:
                gone = await http.get(f"/artifacts/{artifact.artifact_id}")
            assert gone.status_code == 404
            assert gone.json()["code"] == "gone"
        finally:
            await reader.stop()


async def test_a_worker_refuses_to_start_on_a_missing_bucket_it_may_not_create(broker, s3, tmp_path):
    from streams.artifacts.port import ArtifactStoreError

    overrides = s3.settings(f"absent-{uuid4().hex[:12]}") | {"s3_create_bucket": False}
    worker = Worker(worker_settings(broker.bootstrap, tmp_path, **overrides))
    with pytest.raises(
        ArtifactStoreError, match="does not exist: create it, or set SCRAPESTREAM_S3_CREATE_BUCKET"
    ):
        await worker.start()
