"""Session fixtures: the embedded broker on a free loopback port, always stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from streams.broker.embedded import EmbeddedBroker


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    log_path = tmp_path_factory.mktemp("broker") / "tansu.log"
    embedded = EmbeddedBroker(log_path=log_path)
    asyncio.run(embedded.start())
    try:
        yield embedded
    finally:
        embedded.stop()
