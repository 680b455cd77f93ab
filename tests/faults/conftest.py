"""Every fault scenario's observers are stopped after it, whatever happened."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.faults.scenarios import OBSERVING


@pytest_asyncio.fixture(autouse=True)
async def stop_observers() -> AsyncIterator[None]:
    yield
    while OBSERVING:
        await OBSERVING.pop().__aexit__(None, None, None)
