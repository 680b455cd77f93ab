"""Session fixtures: the embedded broker and an S3 server on free loopback ports, always stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from streams.broker.embedded import EmbeddedBroker, free_loopback_port


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The cheapest gates first: static checks, then everything else in file order."""
    items.sort(key=lambda item: 0 if item.get_closest_marker("static") else 1)


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    log_path = tmp_path_factory.mktemp("broker") / "tansu.log"
    embedded = EmbeddedBroker(log_path=log_path)
    asyncio.run(embedded.start())
    try:
        yield embedded
    finally:
        embedded.stop()


@dataclass(frozen=True)
class S3Server:
    """A real S3-compatible server (moto) on loopback; credentials are its fixed test ones."""

    endpoint_url: str

    def settings(self, bucket: str) -> dict[str, object]:
        return {
            "artifact_store": "s3",
            "s3_bucket": bucket,
            "s3_endpoint_url": self.endpoint_url,
            "s3_access_key_id": "testing",
            "s3_secret_access_key": "testing",
            "s3_create_bucket": True,
        }

    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    port = free_loopback_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.stop()
