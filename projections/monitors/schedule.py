"""When a monitor's checks are due: every N seconds or a cron expression in a time zone, spread by
a jitter of the monitor's own, inside an optional active window, with missed checks collapsed.

Due times are a pure function of the schedule, the monitor and an instant, so they live in the
log (the last due time a check was made for) and no process keeps a timer per monitor.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

MIN_INTERVAL_S = 10
MAX_INTERVAL_S = 366 * 86_400
MAX_CRON_CHARS = 120
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
REFERENCE = datetime(2026, 1, 1, tzinfo=UTC)  # schedules repeat: any start shows one that never falls due
MONDAY = date(2024, 1, 1)
# A cron expression can name a day that comes rarely (29 February, a Friday the 13th in a window):
# past this many candidates the next due time is reported as none.
MAX_CANDIDATES = 5_000
WEEKDAYS = frozenset(range(7))
CRON_CATCH_UP = timedelta(days=2)
MAX_CRON_JITTER_S = 3_600


@dataclass(frozen=True, slots=True)
class Window:
    """The hours, in the schedule's time zone, when checks may run; `end` before `start` spans
    midnight. `days` are ISO weekdays less one (Monday 0) on which the window opens."""

    start: time
    end: time
    days: frozenset[int] = WEEKDAYS

    def holds(self, local: datetime) -> bool:
        moment = local.time()
        if self.start <= self.end:
            return local.weekday() in self.days and self.start <= moment < self.end
        if moment >= self.start:
            return local.weekday() in self.days
        return (local.weekday() - 1) % 7 in self.days and moment < self.end


@dataclass(frozen=True, slots=True)
class Schedule:
    every_s: int | None = None
    cron: str | None = None
    time_zone: str = "UTC"
    jitter_s: int = 0
    window: Window | None = None


@dataclass(frozen=True, slots=True)
class Due:
    """The check to make now, and how many due times before it were missed (collapsed into it)."""

    at: datetime
    missed: int


def schedule_problem(schedule: Schedule) -> str | None:
    """Why a schedule cannot be kept, in words a caller can act on; None when it can."""
    if (schedule.every_s is None) == (schedule.cron is None):
        return "give either an interval (every_s) or a cron expression, not both or neither"
    if schedule.every_s is not None and not MIN_INTERVAL_S <= schedule.every_s <= MAX_INTERVAL_S:
        return f"an interval is from {MIN_INTERVAL_S} s to {MAX_INTERVAL_S} s, not {schedule.every_s}"
    cron_problem = None if schedule.cron is None else _cron_problem(schedule.cron)
    if cron_problem is not None:
        return cron_problem
    if _zone(schedule.time_zone) is None:
        return f"unknown time zone {schedule.time_zone[:64]!r}"
    if not 0 <= schedule.jitter_s <= (schedule.every_s or MAX_CRON_JITTER_S):
        return (
            f"a jitter is from 0 s to the interval (an hour for a cron expression), not {schedule.jitter_s}"
        )
    window = schedule.window
    if window is not None and (window.start == window.end or not window.days or not window.days <= WEEKDAYS):
        return "a window opens and closes at different times on at least one weekday (0 Monday to 6 Sunday)"
    if schedule.cron is not None and window is not None and not _meets(schedule.cron, window):
        return "the cron expression names no time inside the window: no check would ever be due"
    if next_due(schedule, UUID(int=0), REFERENCE) is None:
        return "the schedule names no due time within reach: no check would ever be due"
    return None


def _meets(expression: str, window: Window) -> bool:
    """Whether some minute the expression names, on some weekday it can fall on, is inside the window
    (at most 7 x 24 x 60 minutes looked at, never a walk through the calendar)."""
    sim = CronSim(expression, EPOCH)
    dow, dom = sim.parts[4], sim.parts[2]
    numbered = [day for day in sim.weekdays if isinstance(day, int)]  # `5L` and `5#2` are pairs
    if dow == "*" or (dom != "*" and not sim.day_and) or len(numbered) < len(sim.weekdays):
        weekdays = WEEKDAYS  # a day of the month falls on every weekday in time
    else:
        weekdays = frozenset((day - 1) % 7 for day in numbered)  # cron counts from Sunday
    hours, minutes = sorted(sim.hours), sorted(sim.minutes)
    return any(
        window.holds(datetime.combine(MONDAY + timedelta(days=day), time(hour, minute)))
        for day in weekdays
        for hour in hours
        for minute in minutes
    )


def next_due(schedule: Schedule, monitor_id: UUID, after: datetime) -> datetime | None:
    """The first due time strictly after `after`, jitter included; None when the schedule names no
    time within reach (a window and a cron expression that never meet)."""
    jitter = timedelta(seconds=jitter_of(schedule, monitor_id))
    nominal = after - jitter
    for _ in range(MAX_CANDIDATES):
        nominal = _next_nominal(schedule, nominal)
        if in_window(schedule, nominal):
            return nominal + jitter
        if schedule.window is not None:  # on to the window's next opening, not through every closed hour
            opening = _next_opening(schedule.window, _zone_or_utc(schedule), nominal)
            if opening is None:
                return None
            nominal = opening - timedelta(microseconds=1)
    return None


def due_at(schedule: Schedule, monitor_id: UUID, last_due: datetime, now: datetime) -> Due | None:
    """The check due by `now` after the one made for `last_due`, or None when none is due yet. Due
    times missed while nothing ran (downtime) are one check, the latest, counting the others (up
    to `MAX_CANDIDATES` of a cron schedule's, then from two days before `now`)."""
    due = next_due(schedule, monitor_id, last_due)
    if due is None or due > now:
        return None
    if schedule.every_s is not None:
        jitter = timedelta(seconds=jitter_of(schedule, monitor_id))
        return _latest_interval(schedule, timedelta(seconds=schedule.every_s), jitter, due, now)
    missed = 0
    while True:
        later = next_due(schedule, monitor_id, due)
        if later is None or later > now:
            return Due(due, missed)
        due, missed = later, missed + 1
        if missed % MAX_CANDIDATES == 0 and due < now - CRON_CATCH_UP:
            due = next_due(schedule, monitor_id, now - CRON_CATCH_UP) or due


def jitter_of(schedule: Schedule, monitor_id: UUID) -> int:
    """The monitor's own offset from its nominal due times, the same on every worker: monitors on
    one schedule spread over the jitter instead of falling due together."""
    return offset_of(monitor_id, schedule.jitter_s)


def offset_of(monitor_id: UUID, within_s: int) -> int:
    """Seconds from 0 to `within_s`, the same for a monitor everywhere, spread evenly over monitors."""
    if within_s <= 0:
        return 0
    digest = hashlib.blake2b(monitor_id.bytes, digest_size=8).digest()
    return int.from_bytes(digest, "big") % (within_s + 1)


def _latest_interval(
    schedule: Schedule, every: timedelta, jitter: timedelta, due: datetime, now: datetime
) -> Due:
    """The last of an interval schedule's due times from `due` to `now`, and how many come before it:
    counted window by window (a day's opening at a time), not due time by due time."""
    first, last = due - jitter, now - jitter
    if schedule.window is None:
        count = (last - first) // every
        return Due(due + count * every, count)
    latest, count = due, 0
    for start, end in _spans(schedule.window, _zone_or_utc(schedule), first, last):
        low = EPOCH + -((EPOCH - start) // every) * every  # the grid's first point at or after start
        high = (
            EPOCH
            + ((min(end, last + timedelta(microseconds=1)) - EPOCH - timedelta(microseconds=1)) // every)
            * every
        )
        if high >= low:
            count += (high - low) // every + 1
            latest = high + jitter
    return Due(latest, max(count - 1, 0))


def _spans(window: Window, zone: tzinfo, first: datetime, last: datetime) -> list[tuple[datetime, datetime]]:
    """The window's open spans, each `[start, end)` in UTC, that meet `[first, last]`."""
    day = first.astimezone(zone).date() - timedelta(days=1)
    spans = []
    while day <= last.astimezone(zone).date():
        if day.weekday() in window.days:
            start = datetime.combine(day, window.start, tzinfo=zone)
            close_day = day if window.start < window.end else day + timedelta(days=1)
            end = datetime.combine(close_day, window.end, tzinfo=zone)
            start, end = max(start.astimezone(UTC), first), end.astimezone(UTC)
            if start < end and start <= last:
                spans.append((start, end))
        day += timedelta(days=1)
    return spans


def _next_opening(window: Window, zone: tzinfo, after: datetime) -> datetime | None:
    local = after.astimezone(zone)
    for ahead in range(9):
        day = local.date() + timedelta(days=ahead)
        opening = datetime.combine(day, window.start, tzinfo=zone)
        if day.weekday() in window.days and opening > local:
            return opening.astimezone(UTC)
    return None


def _next_nominal(schedule: Schedule, after: datetime) -> datetime:
    if schedule.every_s is not None:
        elapsed = (after - EPOCH) // timedelta(seconds=schedule.every_s)
        return EPOCH + timedelta(seconds=(elapsed + 1) * schedule.every_s)
    local = after.astimezone(_zone_or_utc(schedule))
    # cronsim yields times after its start, to the second; a start within a second goes past it.
    following = next(CronSim(schedule.cron or "", local.replace(microsecond=0)))
    return following.astimezone(UTC)


def in_window(schedule: Schedule, at: datetime) -> bool:
    if schedule.window is None:
        return True
    return schedule.window.holds(at.astimezone(_zone_or_utc(schedule)))


def _cron_problem(expression: str) -> str | None:
    if len(expression) > MAX_CRON_CHARS:
        return f"a cron expression has at most {MAX_CRON_CHARS} characters"
    try:
        CronSim(expression, EPOCH)
    except CronSimError as exc:
        return f"not a cron expression: {str(exc)[:200]}"
    return None


def _zone_or_utc(schedule: Schedule) -> tzinfo:
    return _zone(schedule.time_zone) or UTC


def _zone(name: str) -> ZoneInfo | None:
    if not name or len(name) > 64 or name.startswith(("/", ".")) or ".." in name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
