"""How many processes `auto` means, how long a dead one waits, and the probes and metrics of several."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from streams.supervisor import merge
from streams.supervisor.children import MAX_BACKOFF_S, backoff_s, exit_named
from streams.supervisor.count import process_count, quota_cores


def view(index: int, state: str = "serving", last_exit: str | None = None) -> dict[str, object]:
    return {"index": index, "state": state, "last_exit": last_exit}


def test_a_number_is_kept_and_auto_is_at_least_one_and_at_most_the_cores():
    import os

    assert process_count(3) == 3
    assert 1 <= process_count("auto") <= len(os.sched_getaffinity(0))


def test_a_cgroup_quota_rounds_up_to_whole_cores_and_max_is_none():
    assert quota_cores("max", "100000") is None
    assert quota_cores("-1", "100000") is None
    assert quota_cores("150000", "100000") == 2
    assert quota_cores("50000", "100000") == 1
    assert quota_cores("400000", "100000") == 4
    assert quota_cores("junk", "100000") is None


@given(st.integers(min_value=1, max_value=1_000))
def test_backoff_grows_and_stops_at_its_ceiling(failures):
    assert 0 < backoff_s(failures) <= backoff_s(failures + 1) <= MAX_BACKOFF_S


def test_an_exit_is_named_by_its_code_or_signal():
    assert exit_named(-9) == "was killed by SIGKILL"
    assert exit_named(0) == "exited cleanly (code 0)"
    assert exit_named(3) == "exited with code 3"


def test_health_sums_counters_and_joins_partitions_and_a_restarting_process_is_no_failure():
    answers = {
        0: {"status": "ok", "owned_partitions": [1], "counters": {"a": 2}},
        1: {"status": "ok", "owned_partitions": [0], "counters": {"a": 3, "b": 1}},
    }
    status, body = merge.health(answers, [view(0), view(1), view(2, "restarting", "was killed by SIGKILL")])
    assert status == 200
    assert body["owned_partitions"] == [0, 1]
    assert body["counters"] == {"a": 5, "b": 1}
    assert "processes" not in body  # the probes need no token: no pids or addresses in them
    status, body = merge.health({0: answers[0]}, [view(0), view(1)])
    assert status == 503  # process 1 says it serves and does not answer: it is stuck
    assert body["status"] == "unresponsive"


def test_ready_only_when_every_process_is_and_each_reason_names_its_process():
    ready = {
        "ready": True,
        "broker_reachable": True,
        "assigned_partitions": [0],
        "catching_up": [],
        "reasons": [],
    }
    late = {
        **ready,
        "ready": False,
        "assigned_partitions": [1],
        "catching_up": [1],
        "reasons": ["catching up"],
    }
    status, body = merge.readiness({0: ready, 1: ready}, [view(0), view(1)])
    assert (status, body["ready"]) == (200, True)
    status, body = merge.readiness({0: ready, 1: late}, [view(0), view(1)])
    assert status == 503
    assert body["reasons"] == ["process 1: catching up"]
    assert body["catching_up"] == [1]
    status, body = merge.readiness(
        {0: ready}, [view(0), view(1, "restarting", "exited with code 1 after 2.0 s")]
    )
    assert status == 503
    assert body["reasons"] == ["process 1 is restarting (it exited with code 1 after 2.0 s)"]


def test_metrics_keep_each_family_once_and_label_each_sample_with_its_process():
    one = (
        '# HELP jobs_total Jobs.\n# TYPE jobs_total counter\njobs_total{state="ok"} 2.0\n'
        "# HELP lag Lag.\n# TYPE lag gauge\nlag 5.0\n"
    )
    two = '# HELP jobs_total Jobs.\n# TYPE jobs_total counter\njobs_total{state="ok"} 3.0\n'
    families = {
        family.name: family
        for family in text_string_to_metric_families(merge.metrics({0: one, 1: two}).decode())
    }
    assert set(families) == {"jobs", "lag"}
    jobs = {sample.labels["process"]: sample.value for sample in families["jobs"].samples}
    assert jobs == {"0": 2.0, "1": 3.0}
    assert families["jobs"].samples[0].labels["state"] == "ok"
    assert [sample.labels for sample in families["lag"].samples] == [{"process": "0"}]
