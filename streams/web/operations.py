"""Probes and metrics for the platform running the worker: the probes need no token, the metrics a
reader of every job's (or a peer worker's credential)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from projections.access import READERS_OF_EVERYTHING
from projections.ledger import RouteLedger
from schemas.work import JobTypeControl
from streams.auth.peering import SIGNATURE_HEADER as PEER_SIGNATURE
from streams.auth.principals import Principal
from streams.broker.compat import LogGapError
from streams.clock import utc_now
from streams.fetch.routes import metering_of, meterings
from streams.jobtypes import BUILT_IN, labels, runnable_here
from streams.moments import as_utc
from streams.readers.ledger import TooLongAgoError, ledgers_as_of
from streams.settings import RouteSettings
from streams.web.auth import Caller, Credentials, authenticated, raw_target
from streams.web.context import fleet_of
from streams.web.errors import ApiError, responses
from streams.web.models import (
    Health,
    JobTypeInfo,
    JobTypeList,
    PeriodSpend,
    Readiness,
    RouteInfo,
    RouteList,
)
from streams.web.ports import Fleet

BROKER_CHECK_S = 2.0
AsOf = Annotated[
    datetime | None,
    Query(description="Each route as its ledger stood then (RFC 3339), folded from the route log's start"),
]
METRICS_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Prometheus text exposition",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
}


router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="The process is up")
async def healthz(request: Request) -> Health:
    fleet = fleet_of(request)
    counters = dict(fleet.counters) | {
        "fold.duplicates_ignored": fleet.store.duplicates_ignored,
        "fold.events_from_log": fleet.ownership.events_from_log,
        "route_ledger.skipped": 0 if fleet.ledger is None else fleet.ledger.skipped,
        "route_ledger.folded": 0 if fleet.ledger is None else fleet.ledger.folded,
        "global_table.skipped": 0 if fleet.table is None else fleet.table.skipped,
    }
    return Health(status="ok", owned_partitions=fleet.ownership.owned, counters=counters)


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Not ready; `reasons` says why"}},
    summary="Broker reachable, partitions assigned, stores caught up",
)
async def readyz(request: Request, response: Response) -> Readiness:
    readiness = await _readiness(fleet_of(request))
    response.status_code = 200 if readiness.ready else 503
    return readiness


@router.get(
    "/metrics",
    response_class=Response,
    responses={**METRICS_RESPONSE, **responses(401, 403)},
    summary="Prometheus metrics (viewers, operators, admins, peer workers: they count every caller's jobs)",
)
async def metrics(request: Request, credentials: Credentials) -> Response:
    fleet = fleet_of(request)
    await reader_of_everything(request, credentials, "every caller's metrics")
    return Response(fleet.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


async def reader_of_everything(request: Request, credentials: Credentials, what: str) -> None:
    """Viewers, operators, admins and peer workers (with auth on)."""
    fleet = fleet_of(request)
    if fleet.principals is not None and not _is_peer(request):
        principal = await authenticated(request, credentials)
        if principal.role not in READERS_OF_EVERYTHING:
            fleet.refusals.refused(principal)
            raise ApiError(403, "forbidden", f"role {principal.role} may not read {what}")


def _is_peer(request: Request) -> bool:
    key = fleet_of(request).peer_key
    if key is None or PEER_SIGNATURE not in request.headers:
        return False
    verdict = key.verify(request.method, raw_target(request), request.headers, int(utc_now().timestamp()))
    return not isinstance(verdict, str)


@router.get(
    "/job-types",
    response_model=JobTypeList,
    responses=responses(401, 403),
    summary="The job types this worker runs, with their labels and resolved profiles",
)
async def job_types(request: Request, principal: Caller) -> JobTypeList:
    fleet = fleet_of(request)
    policy = fleet.policy
    own = fleet.capabilities
    runnable = runnable_here(fleet.settings, fleet.job_types) if own is None else own.runs
    why_not = {} if own is None else own.cannot_run
    items = []
    known = labels(fleet.settings, fleet.job_types)
    switched = fleet.table.controls() if fleet.table is not None else {}
    for name in sorted({*BUILT_IN, *fleet.job_types, *policy.profiles}):  # a label alone declares none
        label = known.get(name, name)
        declared = policy.profile(name)
        profile = declared or policy.default_profile
        items.append(
            JobTypeInfo(
                name=name,
                label=label,
                max_runtime_ms=profile.max_runtime_ms,
                max_attempts=profile.max_attempts,
                declared=declared is not None and name not in policy.fallbacks,
                runs_here=name in runnable,
                not_run_here_because=why_not.get(name),
                enabled=name not in switched or switched[name].enabled,
                control=None if name not in switched else _said(switched[name]),
            )
        )
    return JobTypeList(items=items)


def _said(control: JobTypeControl) -> str:
    state = "on" if control.enabled else "off"
    return f"switched {state} by {control.actor_id} at {control.changed_at.isoformat()}: {control.reason}"


async def _readiness(fleet: Fleet) -> Readiness:
    commands = fleet.settings.topic("commands")
    assigned = sorted(tp.partition for tp in fleet.consumer.assigned() if tp.topic == commands)
    catching_up = fleet.ownership.catching_up
    if fleet.watchdog.is_stopping:  # its Kafka clients may be stopped already: none is asked
        reachable, reasons = False, ["the worker is stopping"]
    else:
        reachable = await fleet.publisher.reachable(BROKER_CHECK_S)
        unanswered = f"no broker at {fleet.settings.kafka_bootstrap} answered within {BROKER_CHECK_S} s"
        reasons = [] if reachable else [unanswered]
    if not fleet.consumer.joined.is_set():
        reasons.append("not yet a member of the consumer group")
    blocked = fleet.ownership.blocked
    for partition, why in sorted(blocked.items()):
        reasons.append(f"partition {partition} is not served: {why}")
    catching_up = [partition for partition in catching_up if partition not in blocked]
    if catching_up:
        reasons.append(f"partitions {catching_up} are still folding the events log")
    unowned = sorted(set(assigned) - set(fleet.ownership.owned) - set(catching_up) - set(blocked))
    if unowned:
        reasons.append(f"partitions {unowned} are assigned but not yet taken over")
    for topic, partitions in fleet.consumer.unowned().items():
        reasons.append(f"partitions {partitions} of {topic} are held by no worker")
    reasons += fleet.watchdog.dead()
    return Readiness(
        ready=not reasons,
        broker_reachable=reachable,
        assigned_partitions=assigned,
        catching_up=catching_up,
        reasons=reasons,
    )


@router.get(
    "/routes",
    response_model=RouteList,
    responses=responses(401, 422, 503),
    summary="Configured routes: prices, budgets, spend and rate, from the route ledger, now or as of a time",
)
async def routes(request: Request, principal: Caller, as_of: AsOf = None) -> RouteList:
    fleet = fleet_of(request)
    now = utc_now()
    ledgers = fleet.ledger.ledgers if fleet.ledger is not None else {}
    if as_of is not None:
        now, ledgers = await _ledgers_as_of(fleet, principal, as_utc(as_of), now)
    items = []
    for name, route in fleet.settings.routes.items():
        ledger = ledgers.get(name) or RouteLedger(metering_of(route))
        items.append(_route_info(name, route, ledger, now))
    return RouteList(items=items)


async def _ledgers_as_of(
    fleet: Fleet, principal: Principal, at: datetime, now: datetime
) -> tuple[datetime, dict[str, RouteLedger]]:
    if at > now:
        raise ApiError(422, "out_of_history", f"{at.isoformat()} is in the future (now is {now.isoformat()})")
    settings = fleet.settings
    metered = meterings(settings)
    kept = fleet.ledger.kept if fleet.ledger is not None else {}
    try:
        async with fleet.costly.slot(principal):
            ledgers = await ledgers_as_of(
                settings.kafka_access,
                settings.topic("routes"),
                settings.client_profile,
                metered,
                at,
                kept,
                settings.as_of_max_records,
            )
    except TooLongAgoError as exc:
        raise ApiError(
            422,
            "out_of_history",
            f"{at.isoformat()} is too far back to tell from here: {exc} (SCRAPESTREAM_AS_OF_MAX_RECORDS); "
            "this worker keeps route checkpoints from its start on, so later times are cheap",
        ) from exc
    except LogGapError as exc:
        raise ApiError(
            422,
            "out_of_history",
            f"the route log no longer holds its first records ({exc}): spend as of a time is told from the "
            "whole log, and only the latest checkpoint of each route is kept before what remains",
        ) from exc
    return at, ledgers


def _route_info(name: str, route: RouteSettings, ledger: RouteLedger, now: datetime) -> RouteInfo:
    budget = route.budget
    remaining = ledger.remaining(now)
    return RouteInfo(
        name=name,
        kind=route.kind,
        trust=route.resolved_trust,
        enabled=route.enabled,
        metered=ledger.metering.metered,
        price_per_gb=str(route.price_per_gb),
        price_per_browser_second=str(route.price_per_browser_second),
        budget=None if budget is None else str(budget),
        period_s=route.period_s,
        requests_per_s=route.requests_per_s,
        spent_in_period=str(ledger.spent_in(ledger.period_of(now))),
        remaining=None if remaining is None else str(remaining),
        spent_total=str(ledger.spent_total),
        rate=ledger.rate(now),
        granted=ledger.granted,
        reservations_outstanding=ledger.outstanding,
        denied=ledger.denied,
        periods=[
            PeriodSpend(starts_at=ledger.period_start(period), spent=str(spent))
            for period, spent in ledger.periods.items()
        ],
    )
