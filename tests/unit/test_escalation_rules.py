"""Retry escalation across routes: a job blocked on a route is retried on the next one while one is left."""

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from projections.lifecycle.consequences import consequences_of
from projections.lifecycle.escalation import RouteLadder
from schemas.enums import AttemptOutcome, FailureDisposition, TransportPolicy
from tests.lifecycle import POLICY, T0, Lifecycle, attempt_under, failure, kinds, report, submit, tick

LADDER = RouteLadder(
    candidates={
        TransportPolicy.DIRECT_ONLY: ("direct",),
        TransportPolicy.PROXY_ALLOWED: ("direct", "pool"),
    },
    blocked_on={"direct": frozenset({"HTTP_403", "HTTP_429"}), "pool": frozenset({"HTTP_403"})},
)
ESCALATING = replace(POLICY, routes=LADDER)


def blocked(lifecycle: Lifecycle, route: str, code: str = "HTTP_403", retryable: bool = False):  # type: ignore[no-untyped-def]
    attempt = attempt_under(
        lifecycle.job, AttemptOutcome.HTTP_ERROR, route_name=route, failure=failure(code, retryable=retryable)
    )
    return report(lifecycle.job, attempt)


def test_a_job_blocked_on_its_route_is_retried_on_the_next_and_dead_letters_once_none_is_left():
    lifecycle = Lifecycle(policy=ESCALATING)
    lifecycle(submit(transport_policy=TransportPolicy.PROXY_ALLOWED))
    assert kinds(lifecycle(blocked(lifecycle, "direct"), T0)) == ["AttemptRecorded", "RetryScheduled"]
    assert "retried on another route" in lifecycle.job.failure.safe_message
    now = lifecycle.job.next_attempt_at
    dispatched = lifecycle(tick(lifecycle.job.job_id), now)
    (work,) = consequences_of(lifecycle.state, dispatched, ESCALATING).due
    assert work.avoid_routes == ("direct",)
    assert kinds(lifecycle(blocked(lifecycle, "pool"), now)) == ["AttemptRecorded", "JobDeadLettered"]
    assert (lifecycle.job.failure.code, lifecycle.job.failure.disposition) == (
        "HTTP_403",
        FailureDisposition.TERMINAL,
    )


def test_a_job_with_no_other_route_is_not_escalated():
    lifecycle = Lifecycle(policy=ESCALATING)
    lifecycle(submit(transport_policy=TransportPolicy.DIRECT_ONLY))
    assert kinds(lifecycle(blocked(lifecycle, "direct"))) == ["AttemptRecorded", "JobDeadLettered"]


def test_a_failure_the_route_does_not_name_leaves_it_in_use():
    lifecycle = Lifecycle(policy=ESCALATING)
    lifecycle(submit(transport_policy=TransportPolicy.PROXY_ALLOWED))
    events = lifecycle(blocked(lifecycle, "direct", "HTTP_503", retryable=True))
    assert kinds(events) == ["AttemptRecorded", "RetryScheduled"]
    dispatched = lifecycle(tick(lifecycle.job.job_id), lifecycle.job.next_attempt_at)
    (work,) = consequences_of(lifecycle.state, dispatched, ESCALATING).due
    assert work.avoid_routes == ()


@given(
    st.lists(st.sampled_from(["direct", "pool", "other"]), max_size=6),
    st.sampled_from(["HTTP_403", "HTTP_500"]),
)
def test_only_routes_blocked_by_a_code_they_name_are_avoided(routes, code):
    lifecycle = Lifecycle(policy=ESCALATING)
    lifecycle(submit(transport_policy=TransportPolicy.PROXY_ALLOWED))
    attempts = tuple(
        attempt_under(lifecycle.job, AttemptOutcome.HTTP_ERROR, route_name=route, failure=failure(code))
        for route in routes
    )
    avoided = LADDER.avoided(attempts)
    assert set(avoided) == {route for route in routes if code in LADDER.blocked_on.get(route, frozenset())}
    assert len(avoided) == len(set(avoided))


def test_an_answer_that_blocked_its_route_makes_no_negative_cache_entry():
    lifecycle = Lifecycle(policy=ESCALATING)
    lifecycle(submit(transport_policy=TransportPolicy.PROXY_ALLOWED))
    attempt = attempt_under(
        lifecycle.job,
        AttemptOutcome.HTTP_ERROR,
        route_name="direct",
        http_status=403,
        failure=failure("HTTP_403", retryable=False),
    )
    events = lifecycle(report(lifecycle.job, attempt))
    assert consequences_of(lifecycle.state, events, ESCALATING).cache_entries == []
    assert consequences_of(lifecycle.state, events, POLICY).cache_entries != []  # without the ladder, kept
