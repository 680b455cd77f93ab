"""The route ledger's rules: budgets per period, request rates, reconciliation, idempotence."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from uuid import UUID, uuid4

from hypothesis import given
from hypothesis import strategies as st

from projections.ledger import Metering, RouteLedger
from schemas.codec import decode_as, encode
from schemas.types import to_cost_scale
from schemas.work import RouteCheckpoint, RouteReconciled, RouteReserved

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
AMOUNTS = st.decimals(min_value=Decimal("0.000001"), max_value=Decimal("5"), places=6)


def reservation(at: datetime, estimated: Decimal, reservation_id: UUID | None = None) -> RouteReserved:
    return RouteReserved(
        reservation_id=reservation_id or uuid4(),
        route="proxy",
        job_id=uuid4(),
        attempt_number=1,
        estimated=estimated,
        requested_at=at,
    )


def reconciliation(reserved: RouteReserved, actual: Decimal) -> RouteReconciled:
    return RouteReconciled(
        reservation_id=reserved.reservation_id,
        route="proxy",
        actual=actual,
        bytes=0,
        browser_seconds=Decimal("0.000000"),
        reconciled_at=reserved.requested_at,
    )


STEPS = st.lists(
    st.tuples(st.integers(0, 30_000), AMOUNTS, st.floats(0, 1), st.booleans()), min_size=1, max_size=60
)


@given(budget=AMOUNTS, steps=STEPS)
def test_no_period_spends_past_its_budget_and_the_total_is_what_was_charged(budget, steps):
    ledger = RouteLedger(Metering(budget=budget, period_s=10))
    charged: dict[UUID, Decimal] = {}
    for offset_ms, estimated, used, reconciled in steps:
        reserved = reservation(T0 + timedelta(milliseconds=offset_ms), estimated)
        decision = ledger.reserve(reserved)
        if decision.granted:
            charged[reserved.reservation_id] = estimated
            if reconciled:
                actual = to_cost_scale(estimated * Decimal(str(used)))
                ledger.reconcile(reconciliation(reserved, actual))
                charged[reserved.reservation_id] = actual
        else:
            assert decision.code == "BUDGET_EXHAUSTED"
            assert decision.retry_at == ledger.period_start(ledger.period_of(reserved.requested_at) + 1)
        assert all(spent <= budget for spent in ledger.periods.values())
    assert ledger.spent_total == sum(charged.values(), Decimal(0))
    assert sum(ledger.periods.values(), Decimal(0)) == ledger.spent_total


@given(steps=STEPS, budget=AMOUNTS)
def test_every_reader_of_the_same_records_decides_the_same(steps, budget):
    records = [reservation(T0 + timedelta(milliseconds=offset), amount) for offset, amount, _, _ in steps]
    first, second = RouteLedger(Metering(budget=budget)), RouteLedger(Metering(budget=budget))
    assert [first.reserve(r) for r in records] == [second.reserve(r) for r in records]


@given(steps=STEPS)
def test_a_record_read_twice_changes_nothing(steps):
    ledger = RouteLedger(Metering(budget=Decimal("3")))
    for offset, amount, used, _ in steps:
        reserved = reservation(T0 + timedelta(milliseconds=offset), amount)
        decision = ledger.reserve(reserved)
        before = (ledger.spent_total, ledger.granted, ledger.denied)
        assert ledger.reserve(reserved) == decision
        assert (ledger.spent_total, ledger.granted, ledger.denied) == before
        actual = to_cost_scale(amount * Decimal(str(used)))
        ledger.reconcile(reconciliation(reserved, actual))
        after = ledger.spent_total
        ledger.reconcile(reconciliation(reserved, actual))
        assert ledger.spent_total == after


@given(
    rate=st.floats(0.2, 50),
    gaps_ms=st.lists(st.integers(0, 700), min_size=1, max_size=80),
)
def test_grants_within_any_rate_window_never_exceed_the_rate(rate, gaps_ms):
    ledger = RouteLedger(Metering(requests_per_s=rate))
    allowed = max(math.floor(rate), 1)
    window = timedelta(seconds=allowed / rate)
    granted: list[datetime] = []
    at = T0
    for gap in gaps_ms:
        at += timedelta(milliseconds=gap)
        decision = ledger.reserve(reservation(at, Decimal("0.000000")))
        if decision.granted:
            granted.append(at)
        else:
            assert decision.code == "RATE_LIMITED"
            assert decision.retry_at is not None
            assert decision.retry_at > at
    for start in granted:
        assert sum(1 for t in granted if start <= t < start + window) <= allowed


def test_a_denied_reservation_is_granted_in_the_next_period():
    ledger = RouteLedger(Metering(budget=Decimal("1.000000"), period_s=60))
    assert ledger.reserve(reservation(T0, Decimal("0.800000"))).granted
    denied = ledger.reserve(reservation(T0 + timedelta(seconds=1), Decimal("0.800000")))
    assert (denied.granted, denied.code) == (False, "BUDGET_EXHAUSTED")
    assert denied.retry_at is not None
    assert ledger.reserve(reservation(denied.retry_at, Decimal("0.800000"))).granted


def test_a_reconciled_reservation_frees_what_it_did_not_use():
    ledger = RouteLedger(Metering(budget=Decimal("1.000000"), period_s=60))
    first = reservation(T0, Decimal("0.800000"))
    ledger.reserve(first)
    ledger.reconcile(reconciliation(first, Decimal("0.100000")))
    assert ledger.reserve(reservation(T0, Decimal("0.800000"))).granted
    assert ledger.spent_total == Decimal("0.900000")


def test_cost_is_priced_per_gigabyte_and_browser_second_at_the_contract_scale():
    metering = Metering(price_per_gb=Decimal("2.5"), price_per_browser_second=Decimal("0.01"))
    assert metering.cost(1_000_000, Decimal("1.5")) == Decimal("0.017500")
    assert metering.cost(1, Decimal(0)).as_tuple().exponent == -6


def state_of(ledger: RouteLedger) -> tuple[object, ...]:
    return (
        ledger.spent_total,
        ledger.granted,
        ledger.denied,
        dict(ledger.periods),
        ledger.checkpoint("proxy", 0, T0),
    )


@given(
    steps=STEPS,
    cut=st.integers(0, 60),
    budget=AMOUNTS,
    rate=st.sampled_from([0.0, 0.5, 3.0]),
    repeats=st.lists(st.integers(0, 59), max_size=5),
)
def test_a_ledger_taken_up_from_its_checkpoint_folds_the_rest_as_the_one_that_read_everything(
    steps, cut, budget, rate, repeats
):
    records: list[RouteReserved | RouteReconciled] = []
    for offset, amount, used, reconciled in steps:
        reserved = reservation(T0 + timedelta(milliseconds=offset * 10), amount)
        records.append(reserved)
        if reconciled:
            records.append(reconciliation(reserved, to_cost_scale(amount * Decimal(str(used)))))
    records += [records[index] for index in repeats if index < len(records)]  # records read again
    metering = Metering(budget=budget, period_s=60, requests_per_s=rate)
    whole, prefix = RouteLedger(metering), RouteLedger(metering)
    cut = min(cut, len(records))
    for record in records[:cut]:
        fold(prefix, record)
    checkpoint = prefix.checkpoint("proxy", cut, T0)
    assert checkpoint is not None
    taken_up = RouteLedger.restored(metering, decode_as(encode(checkpoint), RouteCheckpoint))
    decisions = []
    for index, record in enumerate(records):
        decided = fold(whole, record)
        if index >= cut:
            decisions.append((decided, fold(taken_up, record)))
    assert all(left == right for left, right in decisions)
    assert state_of(taken_up) == state_of(whole)


def test_a_checkpoint_of_an_older_period_length_counts_its_spend_in_the_new_periods():
    hourly = RouteLedger(Metering(budget=Decimal("5"), period_s=3600))
    hourly.reserve(reservation(T0, Decimal("2.000000")))
    checkpoint = hourly.checkpoint("proxy", 1, T0)
    assert checkpoint is not None
    daily = RouteLedger.restored(Metering(budget=Decimal("5"), period_s=86_400), checkpoint)
    assert daily.remaining(T0) == Decimal("3.000000")


def fold(ledger: RouteLedger, record: RouteReserved | RouteReconciled) -> object:
    if isinstance(record, RouteReserved):
        return ledger.reserve(record)
    ledger.reconcile(record)
    return None
