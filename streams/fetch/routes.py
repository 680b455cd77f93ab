"""Which configured route an attempt takes, and its reservation and reconciliation there.

A job's transport policy names the kinds of route it may use (`DIRECT_ONLY`: direct; `PROXY_ALLOWED`:
direct or a proxy pool; `BROWSER` and `browser.render`: a browser), tried in the configured order.
A route that meters nothing (no price, budget or rate) is taken at once; a metered one is
reserved first through the route ledger (`streams.readers.ledger`), at the cost the policy class's caps
would come to, and reconciled with what the call used. When every usable route denies, the
attempt is a zero-cost `DENIED` one: `BUDGET_EXHAUSTED`, `RATE_LIMITED` or `ROUTE_UNAVAILABLE`
retry when the route can take it again; `ROUTE_NOT_ALLOWED` (nothing serves the policy) is final.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from uuid import UUID

from projections.ledger import ZERO, Decision, Metering, charged
from projections.lifecycle.escalation import ROUTE_KINDS
from projections.lifecycle.identity import name_based
from schemas.enums import ArtifactTrust, TransportRoute
from schemas.types import to_cost_scale
from schemas.work import DueWork, RouteReconciled, RouteReserved
from streams.fetch.browser import most_held_s
from streams.fetch.http import call_deadline_s
from streams.readers.ledger import LedgerReader, reconciliation_key, reservation_key
from streams.runtime.publisher import Outgoing, Sink, outgoing
from streams.settings import ResponseLimits, RouteSettings, Settings

log = logging.getLogger(__name__)
DECISION_TIMEOUT_S = 30.0
ROUTE_OF_KIND = {
    "direct": TransportRoute.DIRECT,
    "proxy": TransportRoute.PROXY,
    "browser": TransportRoute.BROWSER,
}


@dataclass(frozen=True)
class Passage:
    """How an attempt reached the origin: its route, the route's trust, and what it cost there."""

    route: TransportRoute = TransportRoute.DIRECT
    route_name: str | None = None
    trust: ArtifactTrust = ArtifactTrust.VERIFIED
    proxy_url: str | None = field(default=None, repr=False)  # may carry credentials
    reservation_id: UUID | None = None  # set when the route is metered
    estimated: Decimal = ZERO
    actual: Decimal = ZERO
    browser_seconds: Decimal = ZERO
    blocked: tuple[str, ...] = ()


@dataclass(frozen=True)
class Denial:
    code: str
    detail: str
    retry_at: datetime | None = None
    passage: Passage = Passage()  # the route that denied it (the default when none was tried)


def meterings(settings: Settings) -> dict[str, Metering]:
    return {name: metering_of(route) for name, route in settings.routes.items()}


def metering_of(route: RouteSettings) -> Metering:
    return Metering(
        price_per_gb=route.price_per_gb,
        price_per_browser_second=route.price_per_browser_second,
        budget=route.budget,
        period_s=route.period_s,
        requests_per_s=route.requests_per_s,
    )


class Routes:
    def __init__(self, settings: Settings, publisher: Sink, ledger: LedgerReader | None) -> None:
        self._routes = settings.routes
        self._meterings = meterings(settings)
        self._candidates = {
            policy: [name for name, route in settings.routes.items() if route.kind in kinds]
            for policy, kinds in ROUTE_KINDS.items()
        }
        self._publisher = publisher
        self._ledger = ledger
        self._topic = settings.topic("routes")

    async def reserve(self, work: DueWork, limits: ResponseLimits, now: datetime) -> Passage | Denial:
        """The first usable route that grants the attempt, or why none did (rendered work was
        accepted with the `BROWSER` policy)."""
        names = self._candidates[work.transport_policy]
        if not names:
            return Denial("ROUTE_NOT_ALLOWED", f"no route serves transport policy {work.transport_policy}")
        # Routes an earlier attempt was blocked on are passed over while another is left.
        names = [name for name in names if name not in work.avoid_routes] or names
        denials: list[Denial] = []
        for name in names:
            route = self._routes[name]
            tried = Passage(route=ROUTE_OF_KIND[route.kind], route_name=name, trust=route.resolved_trust)
            if not route.enabled:
                denials.append(Denial("ROUTE_UNAVAILABLE", f"route {name} is disabled", passage=tried))
                continue
            passage = replace(tried, proxy_url=_pick(route, work))
            metering = self._meterings[name]
            if not metering.metered:
                return passage
            estimated = _estimate(metering, route, limits, work)
            reservation_id = name_based(work.lease_id, f"route/{name}")
            decision = await self._decide(name, reservation_id, work, estimated, now)
            if decision.granted:
                return replace(passage, reservation_id=reservation_id, estimated=estimated)
            code = decision.code or "ROUTE_UNAVAILABLE"
            denials.append(Denial(code, f"route {name}", decision.retry_at, passage=tried))
        return min(denials, key=lambda denial: (denial.retry_at is None, denial.retry_at or now))

    async def reconcile(
        self, passage: Passage, wire_bytes: int, browser_seconds: Decimal, now: datetime
    ) -> Passage:
        """The passage with what the call cost; a metered route's ledger is told."""
        name = passage.route_name
        if name is None:
            return replace(passage, browser_seconds=browser_seconds)
        actual = charged(self._meterings[name].cost(wire_bytes, browser_seconds), passage.estimated)
        reconciled = replace(passage, actual=actual, browser_seconds=browser_seconds)
        if passage.reservation_id is not None:
            record = RouteReconciled(
                reservation_id=passage.reservation_id,
                route=name,
                actual=actual,
                bytes=wire_bytes,
                browser_seconds=browser_seconds,
                reconciled_at=now,
            )
            try:
                key = reconciliation_key(name, passage.reservation_id)
                await self._publisher.send_all([self._outgoing(name, key, record, now)])
            except Exception as exc:  # the reservation then keeps counting at its estimate
                log.warning("the reconciliation on route %s could not be written: %s", name, exc)
        return reconciled

    async def _decide(
        self, name: str, reservation_id: UUID, work: DueWork, estimated: Decimal, now: datetime
    ) -> Decision:
        if self._ledger is None:
            return Decision(False, "ROUTE_UNAVAILABLE")
        reservation = RouteReserved(
            reservation_id=reservation_id,
            route=name,
            job_id=work.job_id,
            attempt_number=work.attempt_number,
            estimated=estimated,
            requested_at=now,
        )
        release = Passage(route_name=name, reservation_id=reservation_id)
        try:
            return await self._decided(self._ledger, reservation, release, now)
        except asyncio.CancelledError:
            # A stopping worker's reservation (written, or perhaps written) holds nothing, granted or not.
            await self.reconcile(release, 0, ZERO, now)
            raise

    async def _decided(
        self, ledger: LedgerReader, reservation: RouteReserved, release: Passage, now: datetime
    ) -> Decision:
        name, reservation_id = reservation.route, reservation.reservation_id
        try:
            key = reservation_key(name, reservation_id)
            (written,) = await self._publisher.send_all([self._outgoing(name, key, reservation, now)])
        except Exception as exc:  # the ledger cannot be reached now: try again later, uncharged
            log.warning("reserving on route %s failed: %r", name, exc)
            return Decision(False, "ROUTE_UNAVAILABLE")
        try:
            async with asyncio.timeout(DECISION_TIMEOUT_S):
                return await ledger.decision(reservation, written)
        except TimeoutError:
            log.warning("route %s: no decision on reservation %s in time; released", name, reservation_id)
            await self.reconcile(release, 0, ZERO, now)  # should it be granted later, it holds nothing
            return Decision(False, "ROUTE_UNAVAILABLE")

    def _outgoing(
        self, route: str, key: str, record: RouteReserved | RouteReconciled, now: datetime
    ) -> Outgoing:
        """A ledger record, in its route's partition: one partition orders all of a route's records."""
        partition = None if self._ledger is None else self._ledger.partition_for(route)
        return outgoing(self._topic, key, record, partition=partition, at=now)


def _pick(route: RouteSettings, work: DueWork) -> str | None:
    """A pool's proxy for this attempt: spread by job and moved on for each retry, or with request
    affinity one per request identity, so one URL keeps one exit."""
    pool = route.proxy_urls
    if not pool:
        return None
    if route.affinity == "request" and work.request_hash:
        return pool[int(work.request_hash[:16], 16) % len(pool)].get_secret_value()
    return pool[(work.job_id.int + work.attempt_number) % len(pool)].get_secret_value()


def _estimate(metering: Metering, route: RouteSettings, limits: ResponseLimits, work: DueWork) -> Decimal:
    """The most the call may cost, which is all it is ever charged: the class's byte cap, and for a
    browser the longest it may hold it."""
    if route.kind != "browser":
        return metering.cost(limits.max_body_bytes, ZERO)
    seconds = to_cost_scale(Decimal(most_held_s(call_deadline_s(work.max_runtime_ms, limits))))
    return metering.cost(limits.max_decoded_bytes, seconds)
