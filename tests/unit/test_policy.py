import math
from datetime import UTC, datetime, timedelta

import pytest

from projections.lifecycle.policy import ExecutionProfile, Policy, ceil_to_millis, renew_interval_ms

DEFAULTS = ExecutionProfile(max_runtime_ms=20_000, max_attempts=3)


def test_lease_is_max_runtime_plus_grace():
    policy = Policy.from_declared({"http.fetch": (30_000, 3)}, DEFAULTS, lease_grace_ms=10_000)
    assert policy.lease_ms(policy.profiles["http.fetch"].max_runtime_ms) == 40_000


@pytest.mark.parametrize(
    ("lease_ms", "interval_ms"),
    [
        (0, 5_000),
        (-5, 5_000),
        (3_000, 5_000),
        (15_000, 5_000),
        (30_000, 10_000),
        (90_000, 30_000),
        (180_000, 60_000),
        (6 * 3_600_000, 60_000),
    ],
)
def test_renewal_interval_is_a_third_of_the_lease_clamped_to_5_to_60_seconds(lease_ms, interval_ms):
    assert renew_interval_ms(lease_ms) == interval_ms


def test_lease_horizon_is_the_start_window_and_the_longest_lease_of_any_type_plus_grace():
    policy = Policy.from_declared(
        {"http.fetch": (30_000, 3), "dump": (3_600_000, 1)},
        DEFAULTS,
        lease_grace_ms=10_000,
        start_window_ms=60_000,
    )
    assert policy.lease_horizon_ms == 60_000 + 3_600_000 + 10_000 + 10_000


def test_lease_horizon_always_includes_the_deployment_default():
    policy = Policy.from_declared({"tiny": (1, 1)}, DEFAULTS, lease_grace_ms=10_000, start_window_ms=0)
    assert policy.lease_horizon_ms == 20_000 + 10_000 + 10_000


def test_lease_horizon_reaches_past_the_lease_of_a_type_with_no_runtime_ceiling():
    short = ExecutionProfile(max_runtime_ms=3_000, max_attempts=3)
    policy = Policy.from_declared({"long": (0, 1)}, short, lease_grace_ms=1_000, start_window_ms=0)
    assert policy.lease_ms(0) > policy.lease_ms(3_000)
    assert policy.lease_horizon_ms == policy.lease_ms(0) + 1_000


@pytest.mark.parametrize(
    "declared",
    [(-1, 3), (30_000, 0), (math.nan, 3), (math.inf, 3), (30_000, 2.5), (30_000, math.nan)],
)
def test_unusable_profile_falls_back_whole_to_the_defaults_with_one_warning(declared):
    policy = Policy.from_declared({"bad.type": declared, "good": (5_000, 2)}, DEFAULTS)
    assert policy.profiles["bad.type"] == DEFAULTS
    assert policy.profiles["good"] == ExecutionProfile(5_000, 2)
    assert len(policy.warnings) == 1
    assert "bad.type" in policy.warnings[0]


def test_zero_runtime_is_a_usable_profile():
    policy = Policy.from_declared({"instant": (0, 1)}, DEFAULTS)
    assert policy.profiles["instant"] == ExecutionProfile(0, 1)
    assert policy.warnings == ()


@pytest.mark.parametrize(
    ("attempt_number", "seconds"),
    [(0, 1), (1, 1), (2, 2), (3, 4), (4, 8), (12, 2048), (13, 3600), (500, 3600)],
)
def test_backoff_doubles_from_the_base_up_to_the_cap(attempt_number, seconds):
    policy = Policy({}, retry_base_ms=1_000, retry_max_ms=3_600_000)
    assert policy.backoff(attempt_number) == timedelta(seconds=seconds)


def test_retry_times_round_up_to_the_millisecond():
    instant = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=1001)
    assert ceil_to_millis(instant) == datetime(2026, 1, 1, tzinfo=UTC) + timedelta(milliseconds=2)
