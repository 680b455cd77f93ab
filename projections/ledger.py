"""Route budgets as a fold of `scrapestream.routes`: reservations decided in log order.

Every reservation and reconciliation of a route is keyed by the route's name, so one partition
holds them in one order. A reservation is granted or denied by the records before it alone (its
own `requested_at` places it in a budget period and a rate window), so every reader of the
partition decides it the same way: two workers asking at once are ordered by the log, and the
one the budget cannot hold is denied wherever it is read. A granted reservation counts at its
estimate until its reconciliation replaces that with what the call cost, never more than the
estimate: the reservation is the most the call may take, so a period's spend never passes its
budget. Amounts are decimals at the contract's scale throughout. A record no writer could have
meant (a negative amount, a time outside `EARLIEST`..`LATEST`) is refused by `problem_of` before it
is folded.

A ledger's whole state can be written down (`checkpoint`) and taken up again (`restored`): a reader
that starts from a checkpoint and folds the records after it holds exactly the state of one that
folded every record, so the records before a checkpoint may leave the log.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from uuid import UUID

from schemas.types import to_cost_scale
from schemas.work import (
    RouteCheckpoint,
    RouteDecision,
    RouteHold,
    RoutePeriodSpend,
    RouteReconciled,
    RouteReserved,
)

ZERO = Decimal("0.000000")
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
PERIODS_KEPT = 48
DECISIONS_KEPT = 100_000
DECISIONS_CHECKPOINTED = 1_000  # a reservation is written again only within its lease
HOLDS_CHECKPOINTED = 20_000  # keeps a checkpoint well under the broker's record limit
BYTES_PER_GB = Decimal(1_000_000_000)


@dataclass(frozen=True)
class Metering:
    """What a route charges and allows: prices, a budget per period, a request rate."""

    price_per_gb: Decimal = ZERO
    price_per_browser_second: Decimal = ZERO
    budget: Decimal | None = None  # per period; None: unbounded
    period_s: int = 86_400
    requests_per_s: float = 0.0  # 0: no limit

    @property
    def metered(self) -> bool:
        """Whether calls on the route are reserved at all (anything to charge, bound or limit)."""
        priced = self.price_per_gb > 0 or self.price_per_browser_second > 0
        return priced or self.budget is not None or self.requests_per_s > 0

    @property
    def rate_window(self) -> tuple[int, timedelta] | None:
        """The rate as floor(r) grants (at least one) per floor(r)/r seconds; None without a limit."""
        if self.requests_per_s <= 0:
            return None
        allowed = max(math.floor(self.requests_per_s), 1)
        return allowed, timedelta(seconds=allowed / self.requests_per_s)

    def cost(self, wire_bytes: int, browser_seconds: Decimal) -> Decimal:
        if not (self.price_per_gb or self.price_per_browser_second):
            return ZERO
        return to_cost_scale(
            Decimal(wire_bytes) * self.price_per_gb / BYTES_PER_GB
            + browser_seconds * self.price_per_browser_second
        )


def charged(actual: Decimal, estimated: Decimal) -> Decimal:
    """What a call is charged: what it cost, never more than was reserved for it."""
    return min(max(actual, ZERO), estimated)


def problem_of(record: RouteReserved | RouteReconciled) -> str | None:
    """Why a routes record cannot be folded, or None."""
    if isinstance(record, RouteReserved):
        if not EARLIEST <= record.requested_at < LATEST:
            return f"requested_at {record.requested_at.isoformat()} is outside {EARLIEST.year}..{LATEST.year}"
        if record.estimated < 0:
            return f"a negative estimate {record.estimated}"
        return None
    if record.actual < 0 or record.bytes < 0 or record.browser_seconds < 0:
        return "a negative amount"
    return None


def checkpoint_problem(checkpoint: RouteCheckpoint, offset: int) -> str | None:
    """Why a checkpoint read at `offset` cannot be taken up, or None."""
    if not 0 <= checkpoint.through_offset <= offset:
        return f"it claims to cover the records before {checkpoint.through_offset}, but stands at {offset}"
    if checkpoint.period_s <= 0:
        return f"a period of {checkpoint.period_s} s"
    amounts = [checkpoint.spent_total, *(p.spent for p in checkpoint.periods)]
    amounts += [hold.amount for hold in checkpoint.held]
    if min(amounts) < 0 or min(checkpoint.granted, checkpoint.denied) < 0:
        return "a negative amount"
    if any(not EARLIEST <= at < LATEST for at in checkpoint.grant_times):
        return f"a grant time outside {EARLIEST.year}..{LATEST.year}"
    return None


@dataclass(frozen=True)
class Decision:
    granted: bool
    code: str | None = None  # BUDGET_EXHAUSTED or RATE_LIMITED when denied
    retry_at: datetime | None = None


GRANTED = Decision(granted=True)


@dataclass(frozen=True)
class _Held:
    period: int
    amount: Decimal


@dataclass
class RouteLedger:
    """One route's spend, folded from its records in log order."""

    metering: Metering
    spent_total: Decimal = ZERO
    granted: int = 0
    denied: int = 0
    periods: OrderedDict[int, Decimal] = field(default_factory=OrderedDict)
    _held: dict[UUID, _Held] = field(default_factory=dict)
    _decisions: OrderedDict[UUID, Decision] = field(default_factory=OrderedDict)
    _grant_times: deque[datetime] = field(default_factory=deque)

    def reserve(self, reservation: RouteReserved) -> Decision:
        """The decision on a reservation; the same one again for a record read twice."""
        known = self._decisions.get(reservation.reservation_id)
        if known is not None:
            return known
        decision = self._decide(reservation)
        self._decisions[reservation.reservation_id] = decision
        if len(self._decisions) > DECISIONS_KEPT:
            self._decisions.popitem(last=False)
        if decision.granted:
            self._hold(reservation)
        else:
            self.denied += 1
        return decision

    def decision(self, reservation_id: UUID) -> Decision | None:
        return self._decisions.get(reservation_id)

    def reconcile(self, reconciled: RouteReconciled) -> None:
        """The held estimate replaced by the actual cost (at most the estimate), once; unknown or
        repeated ones change nothing."""
        held = self._held.pop(reconciled.reservation_id, None)  # what is settled need not be kept
        if held is None:
            return
        change = charged(reconciled.actual, held.amount) - held.amount
        self.spent_total += change
        if held.period in self.periods:
            self.periods[held.period] += change

    @property
    def outstanding(self) -> int:
        """Granted reservations not yet reconciled (calls under way, or whose report is still due)."""
        return len(self._held)

    def spent_in(self, period: int) -> Decimal:
        return self.periods.get(period, ZERO)

    def remaining(self, now: datetime) -> Decimal | None:
        budget = self.metering.budget
        return None if budget is None else max(budget - self.spent_in(self.period_of(now)), ZERO)

    def rate(self, now: datetime) -> int:
        """Reservations granted within the second before `now`."""
        return sum(1 for at in self._grant_times if now - timedelta(seconds=1) < at <= now)

    def period_of(self, at: datetime) -> int:
        return int(at.timestamp()) // self.metering.period_s

    def period_start(self, period: int) -> datetime:
        return datetime.fromtimestamp(period * self.metering.period_s, UTC)

    def _decide(self, reservation: RouteReserved) -> Decision:
        at = reservation.requested_at
        limited = self._rate_limited_until(at)
        if limited is not None:
            return Decision(False, "RATE_LIMITED", limited)
        budget = self.metering.budget
        period = self.period_of(at)
        if budget is not None and self.spent_in(period) + reservation.estimated > budget:
            return Decision(False, "BUDGET_EXHAUSTED", self.period_start(period + 1))
        return GRANTED

    def _rate_limited_until(self, at: datetime) -> datetime | None:
        """When a reservation at `at` may next be granted, if the route's rate is reached."""
        if self.metering.rate_window is None:
            return None
        allowed, window = self.metering.rate_window
        inside = [granted_at for granted_at in self._grant_times if at - window < granted_at <= at]
        if len(inside) < allowed:
            return None
        return inside[-allowed] + window

    def _hold(self, reservation: RouteReserved) -> None:
        period = self.period_of(reservation.requested_at)
        self._held[reservation.reservation_id] = _Held(period, reservation.estimated)
        self.granted += 1
        self.spent_total += reservation.estimated
        if period not in self.periods:
            self.periods[period] = ZERO
            self.periods = OrderedDict(sorted(self.periods.items()))  # a late writer's older period
            while len(self.periods) > PERIODS_KEPT:
                dropped, _ = self.periods.popitem(last=False)
                self._held = {key: held for key, held in self._held.items() if held.period != dropped}
        if period in self.periods:
            self.periods[period] += reservation.estimated
        self._grant_times.append(reservation.requested_at)
        window = self.metering.rate_window[1] if self.metering.rate_window else timedelta(0)
        kept_from = reservation.requested_at - window - timedelta(seconds=1)  # `rate` reads the last second
        while len(self._grant_times) > 1 and self._grant_times[0] < kept_from:
            self._grant_times.popleft()

    def checkpoint(self, route: str, through_offset: int, now: datetime) -> RouteCheckpoint | None:
        """The ledger as it stands before `through_offset`; None when it holds too many unreconciled
        reservations to write in one record (the records then stay the way to it)."""
        if len(self._held) > HOLDS_CHECKPOINTED:
            return None
        decisions = list(self._decisions.items())[-DECISIONS_CHECKPOINTED:]
        return RouteCheckpoint(
            route=route,
            through_offset=through_offset,
            period_s=self.metering.period_s,
            spent_total=self.spent_total,
            granted=self.granted,
            denied=self.denied,
            periods=tuple(RoutePeriodSpend(period=p, spent=spent) for p, spent in self.periods.items()),
            held=tuple(
                RouteHold(reservation_id=key, period=held.period, amount=held.amount)
                for key, held in self._held.items()
            ),
            grant_times=tuple(self._grant_times),
            decisions=tuple(
                RouteDecision(
                    reservation_id=key, granted=decided.granted, code=decided.code, retry_at=decided.retry_at
                )
                for key, decided in decisions
            ),
            written_at=now,
        )

    @classmethod
    def restored(cls, metering: Metering, checkpoint: RouteCheckpoint) -> RouteLedger:
        """The ledger a checkpoint wrote down, its periods renumbered if the period's length changed since."""

        def period(number: int) -> int:
            return number * checkpoint.period_s // metering.period_s

        periods: OrderedDict[int, Decimal] = OrderedDict()
        for spend in checkpoint.periods:
            periods[period(spend.period)] = periods.get(period(spend.period), ZERO) + spend.spent
        ledger = cls(
            metering,
            spent_total=checkpoint.spent_total,
            granted=checkpoint.granted,
            denied=checkpoint.denied,
            periods=OrderedDict(sorted(periods.items())),
        )
        ledger._held = {
            hold.reservation_id: _Held(period(hold.period), hold.amount) for hold in checkpoint.held
        }
        ledger._decisions = OrderedDict(
            (decided.reservation_id, Decision(decided.granted, decided.code, decided.retry_at))
            for decided in checkpoint.decisions
        )
        ledger._grant_times = deque(checkpoint.grant_times)
        return ledger
