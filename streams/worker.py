"""The composition root: wires settings, storage, Kafka, fetchers and HTTP into one running worker."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
from collections import Counter
from collections.abc import Coroutine, Sequence
from typing import Any
from urllib.parse import urlsplit

from projections.jobstore import JobStore
from projections.lifecycle.policy import Policy
from projections.storage.rocks import RocksStore
from schemas.enums import PolicyClass
from schemas.errors import ScrapestreamError
from schemas.events import Event
from streams.agents.executor import HttpExecutor
from streams.agents.intake import Intake
from streams.agents.lifecycle import Lifecycle
from streams.agents.maintenance import Maintenance
from streams.agents.monitors.check_reads import CheckReads
from streams.agents.monitors.reading_process import ReadingProcess
from streams.agents.outbox import Outbox
from streams.agents.remote import RemoteResults
from streams.agents.timers import Timers
from streams.artifacts.configured import open_artifact_store
from streams.artifacts.port import ArtifactStore
from streams.artifacts.uploads import Uploads
from streams.auth.peering import PeerKey, PeerSecretError, peer_secret
from streams.auth.preflight import PEERING_UNSET
from streams.auth.principals import Principals, load_principals
from streams.broker.compat import BrokerProfile
from streams.callbacks.keys import callback_keys
from streams.callbacks.sender import CallbackSender
from streams.clock import utc_now
from streams.errors import BrokerError
from streams.fetch.browser import probe_browser, renderer_of
from streams.fetch.http import FetchLimits, HttpFetcher
from streams.fetch.routes import Routes, meterings
from streams.jobtypes import (
    capabilities_here,
    deployment_policy,
    discover,
    is_remote,
    local_types,
    runnable_here,
)
from streams.readers.fleet import Fleet
from streams.readers.global_table import GlobalTable
from streams.readers.ledger import LedgerReader
from streams.readers.snapshots import Snapshots
from streams.runtime import tracing
from streams.runtime.consumer import Stage, StageConsumer
from streams.runtime.deadinput import DeadLetters
from streams.runtime.metrics import Metrics, ScrapeTimeGauges
from streams.runtime.publisher import Publisher
from streams.runtime.routing import Routing, RoutingAssignor
from streams.runtime.schema_registry import SchemaRegistry, register_contract
from streams.runtime.topics import ensure_topics
from streams.runtime.transactions import PartitionTransactions
from streams.runtime.watchdog import Watchdog
from streams.settings import Settings
from streams.web.api import build_api
from streams.web.context import ApiContext
from streams.web.job_views import JobViews
from streams.web.monitors.routes import quota_refusal
from streams.web.peers import Peers
from streams.web.refusals import RefusalLimiter
from streams.web.server import ApiServer

log = logging.getLogger(__name__)
JOIN_TIMEOUT_S = 60.0


class Worker:
    """Every agent of scrapestream in one process. `start()` returns once it is serving."""

    def __init__(
        self, settings: Settings, alone: bool = False, front: str | None = None, process_index: int = 0
    ) -> None:
        self.settings = settings
        self.alone = alone  # no other worker shares its broker (`dev`)
        self.front = front  # set for one of a worker's processes, on a port of its own
        self.process_index = process_index
        self.profile = settings.client_profile
        self.job_types = discover()
        self.policy = deployment_policy(settings, self.job_types)
        self.counters: Counter[str] = Counter()
        self.web_port: int | None = None
        self.metrics = Metrics()
        self.store: JobStore | None = None
        self.lifecycle: Lifecycle | None = None
        self.consumer: StageConsumer | None = None
        self.table: GlobalTable | None = None
        self.ledger: LedgerReader | None = None
        self.maintenance: Maintenance | None = None
        self.snapshots: Snapshots | None = None
        self.executor: HttpExecutor | None = None
        self.fleet: Fleet | None = None
        self.watchdog = Watchdog()
        self._stack = contextlib.AsyncExitStack()

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        settings, stack = self.settings, self._stack
        tracing_on = tracing.configure()
        principals = _principals(settings)
        if self.process_index == 0:  # a setting's line once a worker, not once a process
            if tracing_on:
                log.info("tracing: spans are exported as OTEL_TRACES_EXPORTER says")
            for warning in _setting_warnings(settings, self.policy, principals):
                log.warning(warning)
        peer_key = _peer_key(settings, principals)
        server = ApiServer(
            settings.web_host, settings.web_port, settings.http_head_timeout_s, settings.http_body_timeout_s
        )
        stack.push_async_callback(server.stop)
        self.web_port = server.port
        advertised = settings.advertised_url
        if advertised is not None and self.front is not None:
            advertised = urlsplit(advertised)._replace(netloc=_with_port(advertised, server.port)).geturl()
        routing = Routing(advertised or _own_url(settings.web_host, server.port))
        artifacts = await open_artifact_store(settings)
        stack.push_async_callback(artifacts.close)
        await probe_browser(settings)  # remembered: what asks again below does not wait
        await ensure_topics(settings, {*self.policy.profiles, *runnable_here(settings, self.job_types)})
        table = self.table = GlobalTable(
            settings.kafka_access,
            settings.topic("cache"),
            settings.topic("references"),
            settings.topic("controls"),
            self.profile,
            RocksStore(settings.data_dir / "global-table"),
        )
        stack.push_async_callback(table.stop)  # also when it fails to start
        await table.start()
        self._watch("the global table reader", table.task)
        store = self.store = JobStore(RocksStore(settings.data_dir / "lifecycle"), self.policy)
        stack.callback(store.close)
        publisher = self.publisher = Publisher(
            settings.kafka_access, self.profile, self.counters, settings.public_topics
        )
        await publisher.start()
        stack.push_async_callback(publisher.stop)
        registry = SchemaRegistry.of(settings, self.counters)
        if registry is not None:
            stack.push_async_callback(registry.close)
            publisher.framing = (await register_contract(settings, registry)).applied
        dead = DeadLetters(settings, publisher, self.counters)
        fleet = self.fleet = await self._fleet(routing.own_url, publisher, table)
        ledger = self.ledger = await self._ledger(publisher)
        snapshots = self.snapshots = Snapshots(
            settings, self.profile, store, publisher, lambda: lifecycle.owned, self.counters
        )
        uploads = Uploads(
            {name: job_type for name, job_type in self.job_types.items() if is_remote(job_type)},
            settings.data_dir / "uploads",
            None if peer_key is None else peer_key.derived(b"uploads"),
            lambda: routing.own_url,
            settings.remote_result_max_bytes,
        )
        timers = Timers(settings, store, lambda: lifecycle.owned, publisher, self.policy, utc_now)

        def decided(events: Sequence[Event]) -> None:
            self.metrics.observe_events(events)
            timers.wake()

        lifecycle = self.lifecycle = Lifecycle(
            settings,
            self.profile,
            store,
            publisher,
            self.policy,
            dead,
            utc_now,
            decided,
            snapshots.restore,
            table.hold,
            disabled=lambda: table.disabled,
            runners=fleet.view,
            remote=RemoteResults(self.job_types, artifacts, utc_now, uploads),
            counters=self.counters,
        )
        intake = Intake(settings, publisher, dead, self.counters, utc_now, principals, registry)
        stages: list[Stage] = [intake, lifecycle]
        if settings.executor_concurrency > 0:
            self.executor = self._executor(
                publisher, dead, artifacts, table, Routes(settings, publisher, ledger)
            )
            stages.append(self.executor)
        outbox = Outbox(
            settings, self._callback_sender(), publisher, dead, utc_now, self.metrics, self.counters
        )
        stages.append(outbox)
        reader = ReadingProcess()
        stack.callback(reader.close)
        stages.append(CheckReads(settings, artifacts, publisher, dead, utc_now, reader))
        assignor = RoutingAssignor(routing, settings.topic("commands"))
        transactions = (
            await _transactions(settings, self.profile, self.counters) if settings.exactly_once else None
        )
        consumer = self.consumer = StageConsumer(
            settings.kafka_access,
            settings.consumer_group,
            self.profile,
            stages,
            dead,
            assignor,
            routing,
            transactions,
        )
        for handover in (outbox.reports, lifecycle.due, *([self.executor.reports] if self.executor else [])):
            handover.local = consumer
        intake.local = consumer
        await consumer.start()
        stack.push_async_callback(consumer.stop)
        self.metrics.watch(
            ScrapeTimeGauges(lambda: store.status_counts(lifecycle.owned), self.counters, consumer.lag)
        )
        peers = Peers(settings.peer_timeout_s, peer_key)
        stack.push_async_callback(peers.close)
        partitions = await publisher.partitions(settings.topic("commands"))
        context = ApiContext(
            settings,
            partitions,
            store,
            lifecycle.decisions,
            lifecycle.partitions,
            consumer,
            publisher,
            routing,
            principals,
            self.metrics,
            self.counters,
            artifacts,
            peers,
            job_types=self.job_types,
            policy=self.policy,
            ledger=ledger,
            table=table,
            watchdog=self.watchdog,
            peer_key=peer_key,
            refusals=RefusalLimiter(settings.refusals_per_minute),
            uploads=uploads,
            capabilities=fleet.own,
            views=JobViews(settings.trace_url_template),
            front=self.front,
            process_index=self.process_index,
        )
        intake.count_monitors_with(functools.partial(quota_refusal, context))
        await server.serve(build_api(context))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(JOIN_TIMEOUT_S):
                await consumer.joined.wait()
        self._background("timers", timers.run())
        maintenance = self.maintenance = Maintenance(
            settings,
            store,
            lambda: lifecycle.owned,
            table,
            artifacts,
            publisher,
            lifecycle.decisions.decision,
            utc_now,
            self.counters,
            self.job_types,
            first_process=self.process_index == 0,
        )
        self._background("maintenance", maintenance.run())
        self._background("upload sweeps", uploads.run())
        self._background("snapshots", snapshots.run())

    def _background(self, name: str, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work, name=name)
        self._stack.push_async_callback(_cancelled, task)
        self._watch(name, task)

    def _watch(self, name: str, task: asyncio.Task[None] | None) -> None:
        if task is not None:
            self.watchdog.watch(name, task)

    async def _ledger(self, publisher: Publisher) -> LedgerReader | None:
        """The route ledger, read when some route is metered."""
        measured = meterings(self.settings)
        if not any(metering.metered for metering in measured.values()):
            return None
        ledger = LedgerReader(
            self.settings.kafka_access, self.settings.topic("routes"), self.profile, measured, publisher
        )
        self._stack.push_async_callback(ledger.stop)
        await ledger.start()
        self._watch("the route ledger reader", ledger.task)
        return ledger

    async def _fleet(self, worker: str, publisher: Publisher, table: GlobalTable) -> Fleet:
        own = capabilities_here(self.settings, self.job_types, self.policy)
        fleet = Fleet(worker, own, publisher, self.settings.topic("controls"), table, utc_now, self.alone)
        self._stack.push_async_callback(fleet.stop)
        await fleet.start()
        self._watch("the executor announcements", fleet.task)
        return fleet

    def _executor(
        self,
        publisher: Publisher,
        dead: DeadLetters,
        artifacts: ArtifactStore,
        cache: GlobalTable,
        routes: Routes,
    ) -> HttpExecutor:
        settings = self.settings
        limits = FetchLimits.of(settings.policy_classes[PolicyClass.STANDARD])
        fetcher = HttpFetcher(limits, settings.allow_private_networks, settings.allowed_networks)
        self._stack.push_async_callback(fetcher.close)
        browser = renderer_of(settings)
        if browser is not None:
            self._stack.push_async_callback(browser.close)
        return HttpExecutor(
            settings,
            fetcher,
            artifacts,
            publisher,
            dead,
            utc_now,
            self.metrics,
            cache,
            local_types(self.job_types),
            browser,
            routes,
            self.counters,
        )

    def _callback_sender(self) -> CallbackSender:
        settings = self.settings
        sender = CallbackSender(
            callback_keys(settings.callback_secret, settings.callback_key_generations),
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
        self.watchdog.stopping()
        await self._stack.aclose()


def _setting_warnings(settings: Settings, policy: Policy, principals: Principals | None) -> list[str]:
    unsigned = "SCRAPESTREAM_CALLBACK_SECRET is not set: callbacks are sent unsigned"
    trusted = "auth is off: every HTTP request and every command is trusted as ADMIN"
    return [
        *policy.warnings,
        *([unsigned] if settings.callback_secret is None else []),
        *([trusted] if principals is None else []),
    ]


def _principals(settings: Settings) -> Principals | None:
    document = None if settings.principals is None else settings.principals.get_secret_value()
    return load_principals(settings.auth_enabled, settings.principals_file, document)


def _peer_key(settings: Settings, principals: Principals | None) -> PeerKey | None:
    """The secret every worker proves itself to the others with; required when auth is on."""
    secret = peer_secret(settings)
    if secret is None and principals is not None:
        raise PeerSecretError(PEERING_UNSET)
    return None if secret is None else PeerKey(secret)


async def _transactions(
    settings: Settings, profile: BrokerProfile, counters: Counter[str]
) -> PartitionTransactions:
    """The per-partition transactional producers of `exactly_once`, once the broker is seen to
    start one (the embedded broker cannot)."""
    transactions = PartitionTransactions(settings.kafka_access, profile, settings.consumer_group, counters)
    try:
        await transactions.probe()
    except BrokerError as exc:
        raise BrokerError(
            f"SCRAPESTREAM_PROCESSING_GUARANTEE=exactly_once needs Kafka transactions, and the broker "
            f"at {settings.kafka_bootstrap} cannot start a transactional producer ({exc}); on the "
            "embedded broker set SCRAPESTREAM_PROCESSING_GUARANTEE=at_least_once"
        ) from exc
    return transactions


async def _cancelled(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _with_port(url: str, port: int) -> str:
    host = urlsplit(url).hostname or ""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _own_url(host: str, port: int) -> str:
    """This worker's address for its peers: the bound host, or the machine's name when bound to all."""
    if host in ("", "0.0.0.0", "::"):  # noqa: S104 - a comparison, not a bind
        host = socket.gethostname()
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
