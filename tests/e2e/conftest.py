"""The whole system in-process: the embedded broker, one worker, loopback origins and receivers."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import httpx
import pytest_asyncio
from aiohttp import web
from aiokafka import ConsumerRecord, TopicPartition

from projections.lifecycle.attempts import recorded_attempt
from schemas.codec import decode
from schemas.commands import SubmitJob
from schemas.errors import CodecError
from schemas.records import Attempt, Request
from streams.broker.access import KafkaAccess, plaintext
from streams.broker.clients import kafka_consumer
from streams.broker.compat import end_offsets, records_between, start_whole
from streams.callbacks.keys import CallbackKeys
from streams.client import Client
from streams.clock import utc_now
from streams.settings import Settings, load_settings
from streams.worker import Worker
from tests.brokers import profile, profile_name
from tests.servers import loopback

CALLBACK_SECRET = "whsec_" + "c2NyYXBlc3RyZWFtLXRlc3Qtc2VjcmV0LWtleQ=="


def callback_key(caller: str, generation: int = 1) -> str:
    """The key `caller`'s receiver verifies its callbacks with, in the tests' deployments."""
    return CallbackKeys(CALLBACK_SECRET, {}).key(caller, generation)


@dataclass
class Origin:
    """A loopback HTTP server whose paths misbehave on purpose; it counts every request."""

    port: int = 0
    hits: Counter[str] = field(default_factory=Counter)
    arrivals: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # monotonic
    callbacks: dict[str, list[tuple[dict[str, str], bytes]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    release: asyncio.Event = field(default_factory=asyncio.Event)
    let_go: asyncio.Event = field(default_factory=asyncio.Event)  # ends `/held/...` answers
    mended: asyncio.Event = field(default_factory=asyncio.Event)
    conditions: dict[str, list[str | None]] = field(default_factory=lambda: defaultdict(list))
    authorizations: dict[str, list[str | None]] = field(default_factory=lambda: defaultdict(list))
    host: str = "127.0.0.1"

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """`/<kind>/...`: the first path segment names the behaviour."""
        self.hits[request.path] += 1
        self.arrivals[request.path].append(time.monotonic())
        behaviour = getattr(self, f"_{request.path.split('/')[1]}", None)
        if behaviour is None:
            return web.Response(status=404, text="missing")
        response: web.StreamResponse = await behaviour(request, self.hits[request.path])
        return response

    async def _page(self, request: web.Request, count: int) -> web.Response:
        return web.Response(body=f"page {request.path}".encode(), content_type="text/html")

    async def _product(self, request: web.Request, count: int) -> web.Response:
        """`/product/<price>`: a shop's page stating its offer at that price in JSON-LD."""
        offer = {"@type": "Offer", "price": request.path.split("/", 2)[2], "priceCurrency": "EUR"}
        product = {"@context": "https://schema.org", "@type": "Product", "name": "Kettle", "offers": offer}
        script = f'<script type="application/ld+json">{json.dumps(product)}</script>'
        return web.Response(
            text=f"<html><head>{script}</head><body>shop</body></html>", content_type="text/html"
        )

    async def _flaky(self, request: web.Request, count: int) -> web.Response:
        return web.Response(status=503) if count == 1 else web.Response(text="recovered")

    async def _limited(self, request: web.Request, count: int) -> web.Response:
        if count == 1:
            return web.Response(status=429, headers={"Retry-After": "2"})
        return web.Response(text="allowed")

    async def _unavailable(self, request: web.Request, count: int) -> web.Response:
        return web.Response(status=503, headers={"Retry-After": "30"})

    async def _nostore(self, request: web.Request, count: int) -> web.Response:
        return web.Response(text="private", headers={"Cache-Control": "no-store"})

    async def _forever(self, request: web.Request, count: int) -> web.Response:
        """Claims freshness for about ten thousand years."""
        headers = {"Date": "Mon, 01 Jan 0001 00:00:00 GMT", "Expires": "Fri, 31 Dec 9999 23:59:59 GMT"}
        return web.Response(text="forever", headers=headers)

    async def _stale(self, request: web.Request, count: int) -> web.Response:
        return web.Response(text="stale at once", headers={"Cache-Control": "max-age=0"})

    async def _etag(self, request: web.Request, count: int) -> web.Response:
        """`"v1"` of the page; a 304 to a request that names it in If-None-Match."""
        self.conditions[request.path].append(request.headers.get("If-None-Match"))
        if request.headers.get("If-None-Match") == '"v1"':
            return web.Response(status=304, headers={"ETag": '"v1"'})
        return web.Response(text=f"tagged {request.path}", headers={"ETag": '"v1"'})

    async def _blockedonce(self, request: web.Request, count: int) -> web.Response:
        """403 to the first request, the page after."""
        return web.Response(status=403) if count == 1 else web.Response(text=f"let through {request.path}")

    async def _private(self, request: web.Request, count: int) -> web.Response:
        """The page for `Authorization: Bearer s3cr3t`, 401 otherwise; records what each request sent."""
        sent = request.headers.get("Authorization")
        self.authorizations[request.path].append(sent)
        if sent != "Bearer s3cr3t":
            return web.Response(status=401, text="who are you")
        return web.Response(text=f"private {request.path}")

    async def _away(self, request: web.Request, count: int) -> web.Response:
        """`/away/<host>/<port>/<path>`: a redirect to `/<path>` on another origin."""
        _, _, host, port, target = request.path.split("/", 4)
        return web.Response(status=302, headers={"Location": f"http://{host}:{port}/{target}"})

    async def _once(self, request: web.Request, count: int) -> web.Response:
        """A page the first time, 503 ever after."""
        return web.Response(text=f"once {request.path}") if count == 1 else web.Response(status=503)

    async def _hop(self, request: web.Request, count: int) -> web.Response:
        """`/hop/<n>/<path>`: n + 1 redirects, the last to `/<path>`."""
        _, _, left, target = request.path.split("/", 3)
        location = f"/hop/{int(left) - 1}/{target}" if int(left) > 0 else f"/{target}"
        return web.Response(status=302, headers={"Location": location})

    async def _nocache(self, request: web.Request, count: int) -> web.Response:
        """Storable, but to be validated before every use; a 304 when the validator matches."""
        self.conditions[request.path].append(request.headers.get("If-None-Match"))
        headers = {"ETag": '"n1"', "Cache-Control": "no-cache, max-age=600"}
        if request.headers.get("If-None-Match") == '"n1"':
            return web.Response(status=304, headers=headers)
        return web.Response(text=f"validated {request.path}", headers=headers)

    async def _headers(self, request: web.Request, count: int) -> web.Response:
        """`/headers/<name>=<value>&...`: a page with these caching headers (`~` for spaces)."""
        pairs = [part.split("=", 1) for part in request.path.split("/")[2].split("&")]
        headers = {name: value.replace("~", " ") for name, value in pairs}
        return web.Response(text=f"headers {request.path}", headers=headers)

    async def _notmodified(self, request: web.Request, count: int) -> web.Response:
        return web.Response(status=304)

    async def _missing(self, request: web.Request, count: int) -> web.Response:
        """404 until the test sets `mended`."""
        return web.Response(text="found at last") if self.mended.is_set() else web.Response(status=404)

    async def _broken(self, request: web.Request, count: int) -> web.Response:
        """503 until the test sets `mended`."""
        return web.Response(text="mended") if self.mended.is_set() else web.Response(status=503)

    async def _busy(self, request: web.Request, count: int) -> web.Response:
        """503 with Retry-After: 3 the first time, then a page shared caches may keep for five minutes."""
        if count == 1:
            return web.Response(status=503, headers={"Retry-After": "3"})
        return web.Response(text="not busy now", headers={"Cache-Control": "max-age=300"})

    async def _hostile(self, request: web.Request, count: int) -> web.Response:
        """A page whose markup would run script wherever it is rendered as HTML."""
        body = '<script>window.pwned = "script"</script><img src="x" onerror="window.pwned = \'onerror\'">'
        return web.Response(text=f"<html><body>{body}hostile</body></html>", content_type="text/html")

    async def _png(self, request: web.Request, count: int) -> web.Response:
        """A one-pixel PNG."""
        pixel = bytes.fromhex(
            "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
            "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
        )
        return web.Response(body=pixel, content_type="image/png")

    async def _slow(self, request: web.Request, count: int) -> web.Response:
        await self.release.wait()
        return web.Response(text="slow")

    async def _visits(self, request: web.Request, count: int) -> web.Response:
        """A page that says how often it was asked for: each check finds it changed."""
        return web.Response(text=f"<p>visit {count}</p>", content_type="text/html")

    async def _held(self, request: web.Request, count: int) -> web.Response:
        await self.let_go.wait()
        return web.Response(text="held")

    async def _sleep(self, request: web.Request, count: int) -> web.Response:
        await asyncio.sleep(int(request.path.split("/")[2]) / 1000)
        return web.Response(text="slept")

    async def _bytes(self, request: web.Request, count: int) -> web.Response:
        """`/bytes/<n>/...`: exactly n bytes of body."""
        return web.Response(body=b"x" * int(request.path.split("/")[2]), content_type="text/plain")

    async def _stream(self, request: web.Request, count: int) -> web.StreamResponse:
        """`/stream/<n>/...`: n bytes of body, chunked, with no Content-Length to refuse it by."""
        response = web.StreamResponse()
        response.content_type = "text/plain"
        await response.prepare(request)
        left = int(request.path.split("/")[2])
        while left > 0:
            await response.write(b"s" * min(left, 8_192))
            left -= 8_192
        await response.write_eof()
        return response

    async def _trickle(self, request: web.Request, count: int) -> web.StreamResponse:
        """A kilobyte every 50 ms, for good: a fetch of it ends only by its timeout."""
        response = web.StreamResponse()
        await response.prepare(request)
        while True:
            await response.write(b"t" * 1_024)
            await asyncio.sleep(0.05)

    async def _bomb(self, request: web.Request, count: int) -> web.Response:
        return web.Response(body=gzip.compress(b"\0" * 5_000_000), headers={"Content-Encoding": "gzip"})

    async def _hook(self, request: web.Request, count: int) -> web.Response:
        """`/hook/<n>/...` answers 500 to its first n tries."""
        self.callbacks[request.path].append((dict(request.headers), await request.read()))
        failures = request.path.split("/")[2]
        return web.Response(status=500 if failures.isdigit() and count <= int(failures) else 204)

    async def _slowhook(self, request: web.Request, count: int) -> web.Response:
        self.callbacks[request.path].append((dict(request.headers), await request.read()))
        await self.release.wait()
        return web.Response(status=204)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def origin() -> AsyncIterator[Origin]:
    server = Origin()
    async with loopback(server.handle) as server.port:
        try:
            yield server
        finally:
            server.release.set()
            server.let_go.set()


def worker_settings(bootstrap: str, data_dir: Path, **overrides: Any) -> Settings:
    prefix = f"t{uuid4().hex[:8]}"
    values: dict[str, Any] = {
        "kafka_bootstrap": bootstrap,
        "broker_profile": profile_name(bootstrap),
        "data_dir": data_dir,
        "web_port": 0,
        "auth_enabled": False,
        "partitions": 2,
        "topic_prefix": prefix,
        "group_id": prefix,
        "allow_private_networks": True,
        "retry_base_ms": 300,
        "profiles": {"http.fetch": (8_000, 3)},
        "callback_secret": CALLBACK_SECRET,
        "callback_max_elapsed_s": 3.0,
        "callback_retry_base_s": 0.2,
        "create_topics": True,
        "monitor_first_check_spread_s": 0,  # a baseline at once; the spread has its own test
    }
    return load_settings(**(values | overrides))


class Observer:
    """Reads a topic from its start in the background and keeps every decoded record."""

    def __init__(self, access: KafkaAccess, topic: str) -> None:
        self.records: list[Any] = []
        self.raw: list[Any] = []
        self._changed = asyncio.Condition()
        self._consumer = kafka_consumer(
            access,
            topic,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=10,
            isolation_level=profile(access.bootstrap).isolation_level,  # as an outside reader is told to
        )
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> Observer:
        await start_whole(self._consumer.start, self._consumer.stop)
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        async for message in self._consumer:
            self.raw.append(message)
            try:
                self.records.append(decode(message.value))
            except CodecError:
                continue  # a hostile record some test wrote: the system skips it, and so does this reader
            async with self._changed:
                self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[list[Any]], bool], timeout_s: float = 60) -> list[Any]:
        async def satisfied() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: predicate(self.records))

        await asyncio.wait_for(satisfied(), timeout_s)
        return self.records

    def of_job(self, job_id: UUID) -> list[Any]:
        return [record for record in self.records if getattr(record, "job_id", None) == job_id]

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._consumer.stop()


@dataclass
class System:
    settings: Settings
    worker: Worker | None
    client: Client
    events: Observer
    completions: Observer
    dead_input: Observer
    answers: Observer | None = None  # started by the tests that read answers (each reader costs the broker)

    async def submit(self, url: str, **fields: Any) -> UUID:
        fields.setdefault("deadline_at", utc_now() + timedelta(minutes=5))
        fields.setdefault("caller_identity", "svc-a")
        return await self.client.submit(SubmitJob(request=Request(url=url), **fields))

    async def completion(self, job_id: UUID, timeout_s: float = 60) -> Any:
        await self.completions.wait_for(lambda _: bool(self.completions.of_job(job_id)), timeout_s)
        return self.completions.of_job(job_id)[0]

    def event_kinds(self, job_id: UUID) -> list[str]:
        return [type(event).__name__ for event in self.events.of_job(job_id)]

    def attempts(self, job_id: UUID) -> list[Attempt]:
        """The job's recorded attempts, in order: each `AttemptRecorded`'s, and the one a success holds."""
        return [a for e in self.events.of_job(job_id) if (a := recorded_attempt(e)) is not None]

    async def attempts_seen(self, job_id: UUID) -> list[Attempt]:
        """The job's recorded attempts once the observer has read one (it may trail the completion)."""
        await self.events.wait_for(lambda _: bool(self.attempts(job_id)))
        return self.attempts(job_id)


@contextlib.asynccontextmanager
async def observed_system(settings: Settings, worker: Worker | None = None) -> AsyncIterator[System]:
    """A client and observers of events, completions and dead input; the worker may run elsewhere."""
    observers = [
        await Observer(settings.kafka_access, settings.topic(name)).start()
        for name in ("events", "completions", "dead-input")
    ]
    client = Client(settings.kafka_access, profile(settings.kafka_bootstrap), settings.topic_prefix)
    await client.__aenter__()
    system = System(settings, worker, client, *observers)
    try:
        yield system
    finally:
        await client.__aexit__(None, None, None)
        for observer in [*observers, *([system.answers] if system.answers else [])]:
            await observer.stop()


@contextlib.asynccontextmanager
async def running_system(settings: Settings, process_index: int = 0) -> AsyncIterator[System]:
    """`observed_system` around an in-process worker (process `process_index` of its worker), stopped at
    the end (even one a test replaced)."""
    worker = Worker(settings, process_index=process_index)
    await worker.start()
    system: System | None = None
    try:
        async with observed_system(settings, worker) as system:
            yield system
    finally:
        await (system.worker if system is not None and system.worker is not None else worker).stop()


async def owned_partitions(worker: Worker) -> list[int]:
    async with httpx.AsyncClient() as http:
        health = (await http.get(f"http://127.0.0.1:{worker.web_port}/healthz")).json()
    return list(health["owned_partitions"])


async def settled_ownership(*workers: Worker, partitions: int = 4) -> list[list[int]]:
    """Each worker's partitions (from its /healthz), once every partition is owned by exactly one."""
    for _ in range(300):
        owned = [await owned_partitions(worker) for worker in workers]
        if sorted(p for mine in owned for p in mine) == list(range(partitions)):
            return owned
        await asyncio.sleep(0.1)
    return owned


async def read_topic(bootstrap: str, topic: str, partitions: int) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record of `topic` from its start to its current end (a tombstone's value is None)."""
    wanted = [TopicPartition(topic, partition) for partition in range(partitions)]
    ends = await end_offsets(plaintext(bootstrap), wanted, profile(bootstrap))
    found: list[ConsumerRecord[bytes, bytes]] = []
    for partition in wanted:
        async for records in records_between(plaintext(bootstrap), partition, None, ends[partition]):
            found += records
    return found
