"""What each kind of handler may use of the worker: one port per concern, so a module's imports say
what it reads and changes. `ApiContext` provides them all; a handler asks for the ports it needs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from uuid import UUID

from fastapi import Request, Response

from projections.jobstore import JobStore
from projections.lifecycle.policy import Policy
from schemas.enums import AuditAction
from streams.artifacts.port import ArtifactStore
from streams.artifacts.uploads import Uploads
from streams.auth.peering import PeerKey
from streams.auth.principals import Principal, Principals
from streams.jobtypes import AnyJobType
from streams.readers.fleet import Capabilities
from streams.readers.global_table import GlobalTable
from streams.readers.ledger import LedgerReader
from streams.runtime.consumer import StageConsumer
from streams.runtime.decisions import Decisions, Ownership
from streams.runtime.metrics import Metrics
from streams.runtime.publisher import Publisher
from streams.runtime.routing import Routing
from streams.runtime.watchdog import Watchdog
from streams.settings import Settings
from streams.web.costly import CostlyReads
from streams.web.job_views import JobViews
from streams.web.pacing import ReceiverPacer
from streams.web.peers import Peers
from streams.web.refusals import RefusalLimiter
from streams.web.sessions import ConsoleSessions
from streams.web.shards import Shard


class Audits(Protocol):
    """Reads and refusals recorded in the principal's own audit stream."""

    async def audit(
        self,
        principal: Principal,
        request: Request,
        action: AuditAction,
        refusal: str | None,
        target: str,
        reason: str = ...,
        detail: str | None = ...,
        kind: str = ...,
    ) -> UUID: ...

    def audit_soon(
        self,
        principal: Principal,
        request: Request,
        action: AuditAction,
        refusal: str,
        target: str,
        reason: str = ...,
        kind: str = ...,
    ) -> None: ...


class Reads(Audits, Protocol):
    """A read of jobs or monitors: the store, where an answer comes from, what reading costs."""

    settings: Settings
    store: JobStore
    views: JobViews
    decisions: Decisions
    ownership: Ownership
    costly: CostlyReads
    refusals: RefusalLimiter

    def partition_of(self, job_id: UUID) -> int: ...

    async def forwarded(self, request: Request, job_id: UUID) -> Response | None: ...

    async def gather(
        self,
        principal: Principal,
        path: str,
        params: Mapping[str, Any],
        local: Callable[[list[int]], Shard],
        limit: int,
    ) -> Shard: ...


class Commands(Audits, Protocol):
    """What a request changes: commands on the log, decided by the owner's lifecycle."""

    settings: Settings
    store: JobStore
    principals: Principals | None
    publisher: Publisher
    decisions: Decisions
    refusals: RefusalLimiter
    policy: Policy
    job_types: Mapping[str, AnyJobType]
    replay_pacer: ReceiverPacer
    costly: CostlyReads

    async def forwarded(self, request: Request, job_id: UUID) -> Response | None: ...

    def replay_interval_s(self) -> float: ...


class Stored(Protocol):
    """Artifacts: where they are kept, uploads in progress, and the workers that may hold one."""

    artifacts: ArtifactStore
    uploads: Uploads | None
    routing: Routing
    peers: Peers


class Fleet(Protocol):
    """The worker and its peers as an operator sees them: health, readiness, capacity, the cluster."""

    settings: Settings
    partitions: int
    store: JobStore
    ownership: Ownership
    consumer: StageConsumer
    publisher: Publisher
    routing: Routing
    metrics: Metrics
    counters: Counter[str]
    watchdog: Watchdog
    capabilities: Capabilities | None
    ledger: LedgerReader | None
    table: GlobalTable | None
    policy: Policy
    job_types: Mapping[str, AnyJobType]
    principals: Principals | None
    refusals: RefusalLimiter
    costly: CostlyReads
    peer_key: PeerKey | None
    front: str | None
    process_index: int


class Edge(Protocol):
    """Who is asking: the principals, console sessions, the key peers sign with."""

    settings: Settings
    principals: Principals | None
    sessions: ConsoleSessions
    peer_key: PeerKey | None
    metrics: Metrics

    async def tell_peers(self, target: str) -> None: ...
