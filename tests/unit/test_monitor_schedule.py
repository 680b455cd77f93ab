from datetime import UTC, datetime, time, timedelta
from uuid import UUID, uuid4

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.monitors.schedule import Due, Schedule, Window, due_at, jitter_of, next_due, schedule_problem

T0 = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
MONITOR = UUID("4f6d67d8-27ff-4c9b-899e-b66f41f27ef3")
OFFICE = Window(start=time(9), end=time(17), days=frozenset(range(5)))
NIGHT = Window(start=time(22), end=time(6))


def in_window(schedule: Schedule, at: datetime) -> bool:
    from zoneinfo import ZoneInfo

    return schedule.window is None or schedule.window.holds(at.astimezone(ZoneInfo(schedule.time_zone)))


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        (Schedule(every_s=60), T0, T0 + timedelta(minutes=1)),
        (Schedule(every_s=60), T0 + timedelta(seconds=59, microseconds=999), T0 + timedelta(minutes=1)),
        (Schedule(every_s=3600), T0 + timedelta(minutes=1), T0 + timedelta(hours=1)),
        (
            Schedule(cron="30 9 * * *", time_zone="Europe/Berlin"),
            T0,
            datetime(2026, 12, 4, 8, 30, tzinfo=UTC),
        ),
        # Berlin moves to summer time on 29 March 2026: nine o'clock is 07:00 UTC from then on.
        (
            Schedule(cron="0 9 * * *", time_zone="Europe/Berlin"),
            datetime(2026, 3, 28, 12, tzinfo=UTC),
            datetime(2026, 3, 29, 7, tzinfo=UTC),
        ),
        # Friday evening: an office window's next due time is Monday at nine, Berlin time.
        (
            Schedule(every_s=900, time_zone="Europe/Berlin", window=OFFICE),
            datetime(2026, 12, 4, 17, tzinfo=UTC),
            datetime(2026, 12, 7, 8, tzinfo=UTC),
        ),
        (Schedule(every_s=3600, window=NIGHT), T0, datetime(2026, 12, 3, 22, tzinfo=UTC)),
        # Every minute, in a window of one minute a week: more closed minutes than a walk would take.
        (
            Schedule(cron="* * * * *", window=Window(time(9), time(9, 1), frozenset({0}))),
            T0,
            datetime(2026, 12, 7, 9, tzinfo=UTC),
        ),
        (
            Schedule(every_s=3600, window=NIGHT),
            datetime(2026, 12, 4, 4, 30, tzinfo=UTC),
            datetime(2026, 12, 4, 5, tzinfo=UTC),
        ),
    ],
)
def test_the_next_due_time_of_a_schedule(schedule, after, expected):
    assert schedule_problem(schedule) is None
    assert next_due(schedule, MONITOR, after) == expected


@pytest.mark.parametrize(
    ("schedule", "problem"),
    [
        (Schedule(), "either an interval"),
        (Schedule(every_s=60, cron="* * * * *"), "either an interval"),
        (Schedule(every_s=1), "from 10 s"),
        (Schedule(cron="61 * * * *"), "not a cron expression"),
        (Schedule(cron="* " * 100), "at most 120 characters"),
        (Schedule(every_s=60, time_zone="Mars/Olympus"), "unknown time zone"),
        (Schedule(every_s=60, time_zone="../../etc/passwd"), "unknown time zone"),
        (Schedule(every_s=60, jitter_s=61), "a jitter"),
        (Schedule(every_s=60, window=Window(time(9), time(9))), "a window"),
        (Schedule(every_s=60, window=Window(time(9), time(10), frozenset({7}))), "a window"),
    ],
)
def test_a_schedule_that_cannot_be_kept_says_why(schedule, problem):
    assert problem in (schedule_problem(schedule) or "")


def test_the_jitter_is_the_monitors_own_and_spreads_monitors_over_it():
    schedule = Schedule(every_s=60, jitter_s=30)
    offsets = {jitter_of(schedule, uuid4()) for _ in range(500)}
    assert offsets <= set(range(31))
    assert len(offsets) > 20
    assert jitter_of(schedule, MONITOR) == jitter_of(schedule, MONITOR)
    due = next_due(schedule, MONITOR, T0)
    assert due == T0 + timedelta(seconds=jitter_of(schedule, MONITOR) or 60)


def test_a_cron_and_window_that_never_meet_have_no_due_time():
    never = Schedule(cron="0 12 * * 6", window=Window(time(9), time(17), frozenset(range(5))))
    assert next_due(never, MONITOR, T0) is None
    assert due_at(never, MONITOR, T0, T0 + timedelta(days=30)) is None


def test_a_schedule_that_never_falls_due_is_refused_at_creation():
    minutes = ",".join(str(minute) for minute in range(40))  # a long list, all outside the window
    for never in (
        Schedule(cron=f"{minutes} 0-5 * * *", window=Window(time(12), time(13))),
        Schedule(cron="0 12 * * 6", window=Window(time(9), time(17), frozenset(range(5)))),
        Schedule(cron="30 23 * * 1", window=Window(time(23, 45), time(0, 15), frozenset({0}))),
    ):
        assert "no check would ever be due" in (schedule_problem(never) or "")
    rare = Schedule(cron="0 12 13 * *", window=Window(time(11), time(13), frozenset({4})))  # Fridays 13th
    assert schedule_problem(rare) is None
    overnight = Schedule(
        cron="5 0 * * 2", window=Window(time(23), time(1), frozenset({0}))
    )  # Monday's window
    assert schedule_problem(overnight) is None


WINDOWED_CRONS = st.builds(
    lambda minutes, hours, weekdays, start, length, days: Schedule(
        cron=f"{','.join(map(str, sorted(minutes)))} {','.join(map(str, sorted(hours)))} * * "
        + ",".join(map(str, sorted(weekdays))),
        window=Window(time(start), time((start + length) % 24), frozenset(days)),
    ),
    st.sets(st.integers(0, 59), min_size=1, max_size=4),
    st.sets(st.integers(0, 23), min_size=1, max_size=4),
    st.sets(st.integers(0, 6), min_size=1, max_size=3),
    st.integers(0, 23),
    st.integers(1, 23),
    st.sets(st.integers(0, 6), min_size=1, max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(WINDOWED_CRONS)
def test_a_cron_and_window_are_refused_exactly_when_they_never_meet(schedule):
    assert (schedule_problem(schedule) is None) == (next_due(schedule, MONITOR, T0) is not None)


def test_downtime_collapses_missed_checks_into_the_latest_one():
    every_minute = Schedule(every_s=60)
    assert due_at(every_minute, MONITOR, T0, T0 + timedelta(seconds=59)) is None
    assert due_at(every_minute, MONITOR, T0, T0 + timedelta(minutes=1)) == Due(T0 + timedelta(minutes=1), 0)
    assert due_at(every_minute, MONITOR, T0, T0 + timedelta(hours=2, seconds=30)) == Due(
        T0 + timedelta(hours=2), 119
    )
    a_year = due_at(every_minute, MONITOR, T0, T0 + timedelta(days=365))
    assert a_year == Due(T0 + timedelta(days=365), 365 * 1440 - 1)
    hourly_cron = Schedule(cron="0 * * * *")
    assert due_at(hourly_cron, MONITOR, T0, T0 + timedelta(hours=5, minutes=10)) == Due(
        T0 + timedelta(hours=5), 4
    )


INTERVAL_SCHEDULES = st.builds(
    Schedule,
    every_s=st.sampled_from([10, 60, 300, 900, 3600, 5400, 86_400]),
    time_zone=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"]),
    jitter_s=st.integers(0, 10),
    window=st.none()
    | st.builds(
        Window,
        start=st.times().map(lambda t: t.replace(second=0, microsecond=0)),
        end=st.times().map(lambda t: t.replace(second=0, microsecond=0)),
        days=st.frozensets(st.integers(0, 6), min_size=1),
    ),
).filter(lambda schedule: schedule_problem(schedule) is None)
INSTANTS = st.integers(0, 2 * 365 * 86_400).map(
    lambda s: T0 + timedelta(seconds=s, microseconds=s % 7 * 1000)
)


@settings(max_examples=300, deadline=None)
@given(INTERVAL_SCHEDULES, st.uuids(), INSTANTS, st.integers(0, 3 * 86_400))
def test_a_collapsed_check_is_the_latest_due_time_and_counts_each_one_before_it(
    schedule, monitor, last, gap_s
):
    now = last + timedelta(seconds=gap_s)
    due = due_at(schedule, monitor, last, now)
    walked, at = [], next_due(schedule, monitor, last)
    while at is not None and at <= now and len(walked) < 30_000:
        assert at > last
        assert in_window(schedule, at - timedelta(seconds=jitter_of(schedule, monitor)))
        walked.append(at)
        at = next_due(schedule, monitor, at)
    if not walked:
        assert due is None
    else:
        assert due == Due(walked[-1], len(walked) - 1)
