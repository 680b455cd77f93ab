"""The artifact store the settings ask for, checked before the worker starts."""

from __future__ import annotations

from streams.artifacts.local import LocalArtifactStore
from streams.artifacts.port import ArtifactStore
from streams.artifacts.s3 import S3ArtifactStore
from streams.settings import Settings


async def open_artifact_store(settings: Settings) -> ArtifactStore:
    """The local directory, or the S3 bucket (checked; created when SCRAPESTREAM_S3_CREATE_BUCKET)."""
    if settings.artifact_store == "local":
        return LocalArtifactStore(settings.local_artifacts)
    secret = settings.s3_secret_access_key
    store = S3ArtifactStore.connect(
        bucket=settings.s3_bucket or "",
        prefix=settings.s3_prefix,
        endpoint_url=settings.s3_endpoint_url,
        region=settings.s3_region,
        access_key_id=settings.s3_access_key_id,
        secret_access_key=None if secret is None else secret.get_secret_value(),
    )
    try:
        await store.ensure_bucket(create=settings.s3_create_bucket)
    except BaseException:
        await store.close()
        raise
    return store
