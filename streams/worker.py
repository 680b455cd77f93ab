"""The composition root: wires settings, storage, Kafka, fetchers and HTTP into one running worker."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from typing import Any

from projections.jobstore import JobStore
from projections.storage.rocks import RocksStore
from schemas.errors import ScrapestreamError
from streams.agents.executor import SUPPORTED_JOB_TYPES, HttpExecutor
from streams.agents.intake import Intake
from streams.agents.lifecycle import Lifecycle
from streams.agents.outbox import Outbox
from streams.agents.timers import Timers
from streams.artifacts.local import LocalArtifactStore
from streams.broker.compat import EMBEDDED_TANSU, KAFKA
from streams.callbacks.sender import CallbackSender
from streams.clock import utc_now
from streams.consumer import Stage, StageConsumer
from streams.deadinput import DeadLetters
from streams.fetch.http import FetchLimits, HttpFetcher
from streams.publisher import Publisher
from streams.settings import Settings
from streams.topics import ensure_topics
from streams.web import build_web, serve

log = logging.getLogger(__name__)
JOIN_TIMEOUT_S = 60.0


class Worker:
    """Every agent of scrapestream in one process. `start()` returns once it is serving."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.profile = EMBEDDED_TANSU if settings.broker_profile == "embedded" else KAFKA
        self.policy = settings.policy(runnable=SUPPORTED_JOB_TYPES)
        self.counters: Counter[str] = Counter()
        self.web_port: int | None = None
        self.store: JobStore | None = None
        self.lifecycle: Lifecycle | None = None
        self.consumer: StageConsumer | None = None
        self._stack = contextlib.AsyncExitStack()

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
        store = self.store = JobStore(RocksStore(settings.data_dir / "lifecycle"), self.policy)
        stack.callback(store.close)
        publisher = Publisher(settings.kafka_bootstrap, self.profile)
        await publisher.start()
        stack.push_async_callback(publisher.stop)
        dead = DeadLetters(settings, publisher, self.counters)
        lifecycle = self.lifecycle = Lifecycle(
            settings, self.profile, store, publisher, self.policy, dead, utc_now
        )
        stages: list[Stage] = [Intake(settings, publisher, dead, self.counters, utc_now), lifecycle]
        if settings.executor_concurrency > 0:
            stages.append(self._executor(publisher, dead))
        stages.append(Outbox(settings, self._callback_sender(), publisher, dead, utc_now))
        consumer = self.consumer = StageConsumer(
            settings.kafka_bootstrap, settings.group_id, self.profile, stages, dead
        )
        await consumer.start()
        stack.push_async_callback(consumer.stop)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(consumer.joined.wait(), JOIN_TIMEOUT_S)
        runner, self.web_port = await serve(
            build_web(store, lifecycle, self.counters), settings.web_host, settings.web_port
        )
        stack.push_async_callback(runner.cleanup)
        timers = Timers(settings, store, lambda: lifecycle.owned, publisher, self.policy, utc_now)
        stack.push_async_callback(_cancelled, asyncio.create_task(timers.run()))

    def _executor(self, publisher: Publisher, dead: DeadLetters) -> HttpExecutor:
        settings = self.settings
        limits = FetchLimits(settings.max_body_bytes, settings.max_decoded_bytes, settings.max_redirects)
        fetcher = HttpFetcher(limits, settings.allow_private_networks, settings.allowed_networks)
        self._stack.push_async_callback(fetcher.close)
        artifacts = LocalArtifactStore(settings.data_dir / "artifacts")
        return HttpExecutor(settings, fetcher, artifacts, publisher, dead, utc_now)

    def _callback_sender(self) -> CallbackSender:
        settings = self.settings
        secret = None if settings.callback_secret is None else settings.callback_secret.get_secret_value()
        sender = CallbackSender(
            secret,
            settings.allow_private_networks,
            settings.allowed_networks,
            settings.callback_timeout_s,
            utc_now,
        )
        self._stack.push_async_callback(sender.close)
        return sender

    async def crashed(self) -> BaseException:
        """Returns the error that stopped this worker making progress (never, while it is healthy)."""
        if self.consumer is None:
            raise ScrapestreamError("the worker has not started")
        return await asyncio.shield(self.consumer.crashed)

    async def stop(self) -> None:
        await self._stack.aclose()


async def _cancelled(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
