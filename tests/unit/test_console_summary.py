"""What the console's overview computes from API answers, and the listing filters it searches with."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from projections.jobstore import JobQuery
from schemas.records import Request
from streams.web import summary
from tests.lifecycle import T0, Lifecycle, submit

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
STATES = ["SUCCEEDED", "DEAD_LETTER", "CANCELLED", "PENDING", "LEASED", "REJECTED"]


def job(state: str, accepted_s_ago: float, took_s: float | None, code: str | None = None) -> dict:
    accepted = NOW - timedelta(seconds=accepted_s_ago)
    completed = None if took_s is None else accepted + timedelta(seconds=took_s)
    return {
        "state": state,
        "accepted_at": accepted.isoformat(),
        "completed_at": None if completed is None else completed.isoformat(),
        "failure": None if code is None else {"code": code},
    }


jobs_strategy = st.lists(
    st.builds(
        job,
        st.sampled_from(STATES),
        st.floats(min_value=0, max_value=7200),
        st.none() | st.floats(min_value=0, max_value=600),
    ),
    max_size=60,
)


@given(jobs_strategy)
def test_the_completions_chart_counts_each_finished_job_of_the_window_once(jobs):
    chart = summary.completions_per_second(jobs, NOW, timedelta(hours=1))
    start = chart.x[0]
    counted = round(sum(sum(series) for series in chart.y) * summary.BUCKET_S)
    expected = sum(
        1
        for item in jobs
        if item["state"] in summary.TERMINAL
        and item["completed_at"] is not None
        and start <= datetime.fromisoformat(item["completed_at"]).timestamp() < chart.x[-1] + summary.BUCKET_S
    )
    assert counted == expected
    assert chart.labels == list(summary.TERMINAL)
    assert all(len(series) == len(chart.x) for series in chart.y)


def test_latency_percentiles_are_of_finished_jobs_only():
    jobs = [job("SUCCEEDED", 100, took) for took in (1, 2, 3, 4)] + [job("LEASED", 5, None)]
    assert summary.latency_percentiles(jobs) == {"p50": 3000.0, "p90": 4000.0, "p99": 4000.0}
    assert summary.latency_percentiles([job("PENDING", 1, None)]) is None


def test_metrics_of_every_worker_are_summed_and_a_lagging_stage_is_named():
    first = (
        'scrapestream_jobs{state="SUCCEEDED"} 3.0\n'
        'scrapestream_consumer_lag{partition="0",topic="t.commands"} 1500.0\n'
    )
    second = (
        'scrapestream_jobs{state="SUCCEEDED"} 2.0\nscrapestream_jobs{state="PENDING"} 1.0\n'
        'scrapestream_consumer_lag{partition="1",topic="t.due"} 4.0\n'
    )
    cluster = summary.cluster_metrics([first, second])
    assert cluster.jobs == {"SUCCEEDED": 5, "PENDING": 1}
    assert cluster.lag == {"t.commands": 1500, "t.due": 4}
    assert cluster.behind() == ["t.commands"]


def test_dead_letters_group_by_failure_code_largest_first():
    jobs = [job("DEAD_LETTER", 1, 1, "HTTP_404"), job("DEAD_LETTER", 1, 1, "TIMEOUT")]
    jobs += [job("DEAD_LETTER", 2, 1, "TIMEOUT"), job("DEAD_LETTER", 2, 1)]
    groups = summary.dead_letters_by_failure(jobs)
    assert list(groups) == ["TIMEOUT", "HTTP_404", "UNKNOWN"]
    assert len(groups["TIMEOUT"]) == 2


def test_workers_are_listed_with_the_partitions_they_hold():
    held = summary.partitions_by_worker(
        {0: "http://a", 2: "http://b", 1: "http://a"}, ["http://a", "http://c"]
    )
    assert held == {"http://a": [0, 1], "http://c": [], "http://b": [2]}


def test_a_listing_filters_by_host_url_text_and_acceptance_time():
    lifecycle = Lifecycle()
    lifecycle(submit(request=Request(url="https://Shop.example.com:8443/items?page=2")))
    accepted = lifecycle.job
    assert accepted.accepted.occurred_at >= T0
    assert JobQuery(host="shop.example.com").matches(accepted)
    assert not JobQuery(host="example.com").matches(accepted)
    assert JobQuery(url_contains="items?page=2").matches(accepted)
    assert not JobQuery(url_contains="items?page=3").matches(accepted)
    assert JobQuery(until=accepted.accepted.occurred_at).matches(accepted)
    assert not JobQuery(until=accepted.accepted.occurred_at - timedelta(milliseconds=1)).matches(accepted)


def test_the_busiest_hosts_come_first_with_what_is_still_running():
    jobs = [
        {"state": "SUCCEEDED", "request": {"url": "https://a.example/1"}},
        {"state": "LEASED", "request": {"url": "https://a.example:8443/2"}},
        {"state": "PENDING", "request": {"url": "https://b.example/"}},
    ]
    loads = summary.busiest_hosts(jobs)
    assert [(load.host, load.jobs, load.active) for load in loads] == [
        ("a.example", 2, 1),
        ("b.example", 1, 1),
    ]


def test_a_refused_submission_is_no_hosts_load():
    jobs = [
        {"state": "REJECTED", "request": {"url": "notaurl"}},
        {"state": "REJECTED", "request": {"url": "https://quota.example/"}},
        {"state": "SUCCEEDED", "request": {"url": "https://a.example/"}},
    ]
    assert [load.host for load in summary.busiest_hosts(jobs)] == ["a.example"]


def test_a_redriven_jobs_latency_counts_from_its_redrive():
    redriven = job("DEAD_LETTER", 3600, 3000) | {"redriven_at": (NOW - timedelta(seconds=602)).isoformat()}
    assert summary.latency_percentiles([redriven]) == {"p50": 2000.0, "p90": 2000.0, "p99": 2000.0}
