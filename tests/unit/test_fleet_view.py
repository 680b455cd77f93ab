"""Which job types the running workers run, merged from their announcements."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from schemas.work import ExecutorAnnouncement
from streams.readers.fleet import Capabilities, merged

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
TYPES = st.sampled_from(["http.fetch", "browser.render", "test.echo", "test.plain"])
REASONS = st.dictionaries(TYPES, st.text(min_size=1, max_size=20), max_size=4)


@st.composite
def announcements(draw: st.DrawFn) -> ExecutorAnnouncement:
    return ExecutorAnnouncement(
        worker=f"http://10.0.0.{draw(st.integers(1, 9))}:8080",
        runs=tuple(draw(st.frozensets(TYPES))),
        cannot_run=draw(REASONS),
        announced_at=NOW - timedelta(seconds=60),
        expires_at=NOW + timedelta(seconds=draw(st.integers(-30, 30))),
    )


@given(st.frozensets(TYPES), REASONS, st.lists(announcements(), max_size=4))
def test_a_type_runs_where_any_live_worker_runs_it_and_only_unrun_types_have_a_reason(runs, reasons, others):
    own = Capabilities(runs, {name: why for name, why in reasons.items() if name not in runs})
    seen = merged(own, others, NOW)
    live = [said for said in others if said.expires_at > NOW]
    assert seen.runs == runs.union(*(said.runs for said in live))  # lapsed announcements count for nothing
    assert not set(seen.cannot_run) & seen.runs
    for name, why in own.cannot_run.items():
        if name not in seen.runs:
            assert seen.cannot_run[name] == why  # this worker's own reason first
