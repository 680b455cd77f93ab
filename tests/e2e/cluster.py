"""One harness for the tests of a deployment with auth on: two workers, an observer of its topics, a
signed client per principal (`tests.principals`), and the API as each principal calls it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx

from schemas.commands import SubmitJob
from schemas.records import Request
from streams.client import Client, Signer
from streams.clock import utc_now
from streams.settings import Settings
from streams.worker import Worker
from tests.brokers import profile
from tests.e2e.conftest import System, observed_system, settled_ownership, worker_settings
from tests.principals import ISSUED, PRINCIPALS, ROLES


@dataclass
class Cluster:
    settings: Settings
    workers: tuple[Worker, ...]
    system: System
    clients: dict[str, Client]  # signed as each principal of `tests.principals`

    def api(
        self, worker: int = 0, principal: str | None = "admin", token: str | None = None
    ) -> httpx.AsyncClient:
        """The HTTP API of a worker as `principal` calls it (or with `token`, or with none)."""
        secret = token or (ISSUED[principal].token if principal else None)
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        return httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{self.workers[worker].web_port}", headers=headers
        )

    async def submit(self, caller: str, url: str, **fields: Any) -> UUID:
        """A submission of `caller`'s, signed as `caller`."""
        command = SubmitJob(
            caller_identity=caller,
            request=Request(url=url),
            deadline_at=utc_now() + timedelta(minutes=5),
            **fields,
        )
        return await self.clients[caller].submit(command)


def auth_on(bootstrap: str, data_dir: Path, **settings: Any) -> Settings:
    """A worker's settings with auth on, its principals those of `tests.principals`."""
    fields: dict[str, Any] = {
        "auth_enabled": True,
        "principals": PRINCIPALS,
        "peer_secret": "the-peer-secret-of-the-auth-on-tests-0123456789",
    }
    return worker_settings(bootstrap, data_dir, **(fields | settings))


def signed_client(settings: Settings, name: str) -> Client:
    signer = Signer(name, ISSUED[name].signing_key, deployment=settings.deployment_id)
    return Client(settings.kafka_access, profile(settings.kafka_bootstrap), settings.topic_prefix, signer)


@contextlib.asynccontextmanager
async def running_cluster(settings: Settings, second_data_dir: Path) -> AsyncIterator[Cluster]:
    """Two workers of `settings` (the second on its own data directory), once each owns partitions."""
    workers = (Worker(settings), Worker(settings.model_copy(update={"data_dir": second_data_dir})))
    async with contextlib.AsyncExitStack() as stack:
        for worker in workers:
            await worker.start()
            stack.push_async_callback(worker.stop)
        system = await stack.enter_async_context(observed_system(settings))
        clients = {name: await stack.enter_async_context(signed_client(settings, name)) for name in ROLES}
        owned = await settled_ownership(*workers)
        assert sorted(owned[0] + owned[1]) == list(range(settings.partitions)), f"not settled: {owned}"
        assert all(owned), f"one worker owns nothing: {owned}"
        yield Cluster(settings, workers, system, clients)


async def answered(http: httpx.AsyncClient, method: str, path: str, **options: Any) -> httpx.Response:
    """The answer once partitions stopped moving (503 with Retry-After is the API's way to say so)."""
    for _ in range(100):
        response = await http.request(method, path, **options)
        if response.status_code != 503:
            return response
        await asyncio.sleep(0.1)
    return response
