"""The composition root: wires settings, storage, Kafka, fetchers and HTTP into one running worker."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from typing import Any

from projections.jobstore import JobStore
from projections.storage.rocks import RocksStore
from streams.agents.executor import HttpExecutor
from streams.agents.intake import Intake
from streams.agents.lifecycle import Lifecycle
from streams.agents.outbox import Outbox
from streams.agents.ownership import Ownership
from streams.agents.timers import Timers
from streams.app import Handlers, build_app
from streams.artifacts.local import LocalArtifactStore
from streams.broker.compat import EMBEDDED_TANSU, KAFKA
from streams.callbacks.sender import CallbackSender
from streams.clock import utc_now
from streams.deadinput import DeadLetters
from streams.fetch.http import FetchLimits, HttpFetcher
from streams.publisher import Publisher
from streams.settings import Settings
from streams.topics import ensure_topics
from streams.web import build_web, serve

log = logging.getLogger(__name__)


class Worker:
    """Every agent of scrapestream in one process. `start()` returns once it is serving."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.profile = EMBEDDED_TANSU if settings.broker_profile == "embedded" else KAFKA
        self.policy = settings.policy()
        self.counters: Counter[str] = Counter()
        self.web_port: int | None = None
        self._stack = contextlib.AsyncExitStack()
        self._in_flight: set[asyncio.Future[Any]] = set()

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        settings, stack = self.settings, self._stack
        for warning in self.policy.warnings:
            log.warning(warning)
        if settings.callback_secret is None:
            log.warning("SCRAPESTREAM_CALLBACK_SECRET is not set: callbacks are sent unsigned")
        await ensure_topics(settings)
        store = JobStore(RocksStore(settings.data_dir / "lifecycle"))
        stack.callback(store.close)
        publisher = Publisher(settings.kafka_bootstrap, self.profile)
        await publisher.start()
        stack.push_async_callback(publisher.stop)
        dead = DeadLetters(settings, publisher, self.counters)
        lifecycle = Lifecycle(settings, self.profile, store, publisher, self.policy, utc_now)
        ownership = Ownership(lifecycle.catch_up)
        stack.push_async_callback(ownership.close)
        handlers = Handlers(
            intake=Intake(settings, publisher, dead, self.counters).handle_batch,
            lifecycle=self._lifecycle_handler(lifecycle, ownership),
            executor=await self._executor(publisher),
            outbox=Outbox(settings, self._callback_sender(), publisher).run,
            partitions_assigned=ownership.assigned,
            partitions_revoked=ownership.revoked,
        )
        app = build_app(settings, self.profile, handlers, dead)
        stack.push_async_callback(self._drain)
        await app.start()
        stack.push_async_callback(app.stop)
        runner, self.web_port = await serve(
            build_web(store, ownership, self.counters), settings.web_host, settings.web_port
        )
        stack.push_async_callback(runner.cleanup)
        timers = Timers(settings, store, ownership, publisher, self.policy, utc_now)
        stack.push_async_callback(_cancelled, asyncio.create_task(timers.run()))

    def _lifecycle_handler(self, lifecycle: Lifecycle, ownership: Ownership) -> Any:
        async def handle(commands: list[tuple[int, Any]]) -> None:
            for partition in sorted({partition for partition, _ in commands}):
                await ownership.wait_ready(partition)
            handling = asyncio.ensure_future(lifecycle.handle_batch(commands))
            self._in_flight.add(handling)
            handling.add_done_callback(self._in_flight.discard)
            # A command half handled when the worker stops would republish its consequences.
            await asyncio.shield(handling)

        return handle

    async def _drain(self) -> None:
        """Once the app has stopped, let commands still being handled finish before the producer stops."""
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)

    async def _executor(self, publisher: Publisher) -> Any:
        settings = self.settings
        if settings.executor_concurrency == 0:
            return None
        limits = FetchLimits(settings.max_body_bytes, settings.max_decoded_bytes, settings.max_redirects)
        fetcher = HttpFetcher(limits, settings.allow_private_networks, settings.allowed_networks)
        self._stack.push_async_callback(fetcher.close)
        artifacts = LocalArtifactStore(settings.data_dir / "artifacts")
        return HttpExecutor(settings, fetcher, artifacts, publisher, utc_now).run

    def _callback_sender(self) -> CallbackSender:
        settings = self.settings
        secret = None if settings.callback_secret is None else settings.callback_secret.get_secret_value()
        sender = CallbackSender(
            secret,
            settings.allow_private_networks,
            settings.allowed_networks,
            settings.callback_max_elapsed_s,
            settings.callback_retry_base_s,
            settings.callback_timeout_s,
            utc_now,
        )
        self._stack.push_async_callback(sender.close)
        return sender

    async def stop(self) -> None:
        await self._stack.aclose()


async def _cancelled(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
