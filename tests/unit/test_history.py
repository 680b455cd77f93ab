"""A job as of a time: the fold of its events cut there equals the state it had then."""

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.lifecycle.history import as_of_refusal, events_until, state_as_of
from schemas.records import Request
from tests.lifecycle import T0, Lifecycle, attempt_under, report, submit
from tests.unit.test_lifecycle_properties import next_command


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_state_as_of_a_time_is_the_state_the_job_had_then(data):
    draw = data.draw
    first_submit = submit(
        deadline_at=T0 + timedelta(seconds=draw(st.integers(1, 600))),
        callback_url="https://hooks.example/x",
        request=Request(url="https://example.com/p"),
    )
    lifecycle = Lifecycle()
    now = T0
    had = [(T0 - timedelta(days=1), None)]  # (time, state after the decision made then)
    sent: list = []
    for _ in range(draw(st.integers(1, 20))):
        now += timedelta(milliseconds=draw(st.integers(1, 120_000)))
        command = next_command(draw, lifecycle, first_submit, sent)
        if lifecycle(command, now):
            sent.append(command)
        had.append((now, lifecycle.state))
    at = T0 + timedelta(
        milliseconds=draw(st.integers(-1_000, int((now - T0).total_seconds() * 1000) + 1_000))
    )
    expected = [state for when, state in had if when <= at][-1]
    assert state_as_of(lifecycle.events, at) == expected
    assert all(event.occurred_at <= at for event in events_until(lifecycle.events, at))
    first = lifecycle.events[0].occurred_at
    refusal = as_of_refusal(lifecycle.events, at, now)
    assert (refusal is None) == (first <= at <= now)


def test_a_time_to_come_or_before_the_history_is_refused_naming_what_is_kept():
    lifecycle = Lifecycle()
    lifecycle(submit(), T0)
    lifecycle(report(lifecycle.job, attempt_under(lifecycle.job)), T0)
    events = lifecycle.events
    assert "in the future" in as_of_refusal(events, T0 + timedelta(seconds=5), T0)
    assert f"kept from {T0.isoformat()}" in as_of_refusal(events, T0 - timedelta(seconds=1), T0)
    assert "from its event #2" in as_of_refusal(events[1:], T0, T0)
    assert "no history of this job is kept" in as_of_refusal([], T0, T0)
    assert as_of_refusal(events, T0, T0) is None
