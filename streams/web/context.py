"""The worker's parts the API's handlers share, and where a job's answer comes from; each handler
asks for the ports (`streams.web.ports`) it uses."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

from fastapi import Request, Response

from projections.jobstore import JobStore
from projections.lifecycle.audit import NOT_FOUND, audit_id_of
from projections.lifecycle.identity import audit_stream_id
from projections.lifecycle.policy import Policy
from projections.readindex import Page, merge_pages
from schemas.commands import RecordAudit
from schemas.enums import AuditAction, AuditOutcome
from schemas.types import uuid_text
from streams.artifacts.port import ArtifactStore
from streams.artifacts.uploads import Uploads
from streams.auth.peering import PeerKey
from streams.auth.principals import Principal, Principals
from streams.clock import utc_now
from streams.jobtypes import AnyJobType
from streams.readers.fleet import Capabilities
from streams.readers.global_table import GlobalTable
from streams.readers.ledger import LedgerReader
from streams.runtime.consumer import StageConsumer
from streams.runtime.decisions import Decisions, Ownership
from streams.runtime.metrics import Metrics
from streams.runtime.publisher import Publisher, outgoing, partition_of
from streams.runtime.routing import Routing
from streams.runtime.watchdog import Watchdog
from streams.settings import Settings
from streams.web.costly import CostlyReads
from streams.web.errors import ApiError
from streams.web.job_views import JobViews
from streams.web.models import ShardPage
from streams.web.pacing import ReceiverPacer
from streams.web.peers import Peers
from streams.web.ports import Commands, Edge, Fleet, Reads, Stored
from streams.web.refusals import RefusalLimiter
from streams.web.sessions import ConsoleSessions
from streams.web.shards import Shard, item_json

log = logging.getLogger(__name__)
MAX_REQUEST_ID = 128


@dataclass
class ApiContext:
    settings: Settings
    partitions: int
    store: JobStore
    decisions: Decisions  # what a read or a mutation may wait for from this worker's lifecycle
    ownership: Ownership
    consumer: StageConsumer
    publisher: Publisher
    routing: Routing
    principals: Principals | None
    metrics: Metrics
    counters: Counter[str]
    artifacts: ArtifactStore
    peers: Peers
    job_types: Mapping[str, AnyJobType]
    policy: Policy
    ledger: LedgerReader | None = None
    table: GlobalTable | None = None
    watchdog: Watchdog = field(default_factory=Watchdog)
    views: JobViews = field(default_factory=JobViews)
    peer_key: PeerKey | None = None
    refusals: RefusalLimiter = field(default_factory=lambda: RefusalLimiter(60))
    uploads: Uploads | None = None
    capabilities: Capabilities | None = None  # the job types this worker's executor reads, why not others
    front: str | None = None  # the worker's front, when this is one of its processes
    process_index: int = 0
    costly: CostlyReads = field(default_factory=CostlyReads)
    _audits: set[asyncio.Task[UUID]] = field(default_factory=set)
    replay_pacer: ReceiverPacer = field(default_factory=ReceiverPacer)
    sessions: ConsoleSessions = field(init=False)

    def __post_init__(self) -> None:
        key = None if self.peer_key is None else self.peer_key.derived(b"console sessions")
        self.sessions = ConsoleSessions(self.principals, key, lambda: utc_now().timestamp())

    async def tell_peers(self, target: str) -> None:
        """POSTs `target` (an internal route) to every other worker, as a peer; one that does not
        answer is left out (it hears nothing, and says so in its log of peers)."""
        await asyncio.gather(
            *(self.peers.tell(peer, target) for peer in self.routing.everyone()[1:]), return_exceptions=True
        )

    def replay_interval_s(self) -> float:
        """The least time between two replays to one receiving host, whoever asks for them."""
        return 1.0 / self.settings.replays_per_receiver_per_s

    def partition_of(self, job_id: UUID) -> int:
        return partition_of(uuid_text(job_id).encode(), self.partitions)

    async def forwarded(self, request: Request, job_id: UUID) -> Response | None:
        """The owner's answer when another worker keeps `job_id`; None when this worker answers."""
        partition = self.partition_of(job_id)
        if partition in self.ownership.owned:
            await self.decisions.written(job_id)
            return None
        blocked = self.ownership.blocked.get(partition)
        if blocked is not None:
            raise ApiError(503, "unavailable", f"partition {partition} is not served: {blocked}")
        owner = self.routing.owner_of(partition)
        if owner is None or owner == self.routing.own_url or self.peers.is_forwarded(request):
            raise ApiError(
                503,
                "unavailable",
                f"partition {partition} is moving between workers; retry shortly",
                {"Retry-After": "1"},
            )
        return await self.peers.forward(owner, request)

    def audit_soon(
        self,
        principal: Principal,
        request: Request,
        action: AuditAction,
        refusal: str,
        target: str,
        reason: str = "",
        kind: str = NOT_FOUND,
    ) -> None:
        """A refusal's audit record, sent without holding the answer: a refusal then takes as long
        as the answer for a job that does not exist (no time tells them apart), and is answered even
        while its record cannot be written."""
        task = asyncio.create_task(self.audit(principal, request, action, refusal, target, reason, kind=kind))
        self._audits.add(task)
        task.add_done_callback(self._audited)

    def _audited(self, task: asyncio.Task[UUID]) -> None:
        self._audits.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("a refusal could not be audited: %r", task.exception())

    async def audit(
        self,
        principal: Principal,
        request: Request,
        action: AuditAction,
        refusal: str | None,
        target: str,
        reason: str = "",
        detail: str | None = None,
        kind: str = NOT_FOUND,
    ) -> UUID:
        """Record a read or download in the principal's own audit stream (never in the job's history);
        returns the audit record's id."""
        stream = audit_stream_id(principal.name, utc_now())
        command = RecordAudit(
            command_id=uuid4(),
            job_id=stream,
            actor_id=principal.name,
            actor_role=principal.role,
            action=action,
            outcome=AuditOutcome.ALLOWED if refusal is None else AuditOutcome.DENIED,
            detail=refusal or detail or "allowed",
            target=target,
            reason=reason,
            request_id=request_id(request),
            refusal="" if refusal is None else kind,
        )
        await self.publisher.send_all([outgoing(self.settings.topic("commands"), stream, command)])
        return audit_id_of(command.command_id)

    async def gather(
        self,
        principal: Principal,
        path: str,
        params: Mapping[str, Any],
        local: Callable[[list[int]], Shard],
        limit: int,
    ) -> Shard:
        """One page of a listing over every worker's partitions, merged newest first.

        Refuses (503) rather than answer from part of the partitions while they move.
        """
        owned = self.ownership.owned
        peers = self.routing.everyone()[1:]
        remote = await asyncio.gather(
            *(self.peers.shard(peer, path, params, principal, ShardPage) for peer in peers)
        )
        pages = [local(owned)]
        covered = set(owned)
        for shard in remote:
            covered.update(shard.partitions)
            pages.append(Page([(at, item_json(item)) for at, item in shard.items], shard.resume_after))
        missing = sorted(set(range(self.partitions)) - covered)
        blocked = sorted(set(missing) & set(self.ownership.blocked))
        if blocked:
            raise ApiError(503, "unavailable", f"partitions {blocked} are not served; see /readyz")
        if missing:
            raise ApiError(
                503,
                "unavailable",
                f"partitions {missing} are moving between workers; retry shortly",
                {"Retry-After": "1"},
            )
        return merge_pages(pages, limit)


def _context(request: Request) -> ApiContext:
    context: ApiContext = request.app.state.context
    return context


def reads_of(request: Request) -> Reads:
    return _context(request)


def commands_of(request: Request) -> Commands:
    return _context(request)


def stored_of(request: Request) -> Stored:
    return _context(request)


def fleet_of(request: Request) -> Fleet:
    return _context(request)


def edge_of(request: Request) -> Edge:
    return _context(request)


def request_id(request: Request) -> str:
    return request.headers.get("x-request-id", "")[:MAX_REQUEST_ID] or uuid4().hex
