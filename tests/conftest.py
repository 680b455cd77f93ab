"""Session fixtures: the embedded broker on a free loopback port, always stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from streams.broker.embedded import EmbeddedBroker


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
