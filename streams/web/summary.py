"""What `GET /overview` says, computed from job views and metrics: pure functions over JSON."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from streams.web.models import Chart, HostLoad

TERMINAL = ("SUCCEEDED", "DEAD_LETTER", "CANCELLED")
ACTIVE = frozenset({"PENDING", "LEASED", "RETRY_WAIT"})
BUCKET_S = 60
LAG_BEHIND_RECORDS = 1_000  # a stage this far behind on a topic gets a badge


def completions_per_second(jobs: Iterable[Mapping[str, Any]], now: datetime, window: timedelta) -> Chart:
    """Completions per second of each terminal state, per minute over `window` up to `now`."""
    start = int((now - window).timestamp()) // BUCKET_S * BUCKET_S
    buckets = list(range(start, int(now.timestamp()) + 1, BUCKET_S))
    counts: dict[str, Counter[int]] = defaultdict(Counter)
    for job in jobs:
        completed = _completed_at(job)
        if completed is not None and job["state"] in TERMINAL:
            counts[job["state"]][int(completed.timestamp()) // BUCKET_S * BUCKET_S] += 1
    series = [[counts[state][at] / BUCKET_S for at in buckets] for state in TERMINAL]
    return Chart(labels=list(TERMINAL), x=buckets, y=series, unit="completions/s")


def completed_since(jobs: Iterable[Mapping[str, Any]], since: datetime) -> int:
    """How many of `jobs` ended at or after `since`."""
    return sum(
        1
        for job in jobs
        if job["state"] in TERMINAL and (completed := _completed_at(job)) is not None and completed >= since
    )


def outcome_mix(jobs: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    mix = Counter(job["state"] for job in jobs if job["state"] in (*TERMINAL, "REJECTED"))
    return dict(sorted(mix.items()))


def latency_percentiles(jobs: Iterable[Mapping[str, Any]]) -> dict[str, float] | None:
    """Submit→completion milliseconds at p50, p90 and p99 of the finished jobs (a redriven job's from its
    redrive); None without any."""
    latencies = sorted(
        (completed - datetime.fromisoformat(job.get("redriven_at") or job["accepted_at"])).total_seconds()
        * 1000
        for job in jobs
        if (completed := _completed_at(job)) is not None and job["state"] in TERMINAL
    )
    if not latencies:
        return None
    return {name: latencies[min(len(latencies) - 1, int(len(latencies) * q))] for name, q in _QUANTILES}


_QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))


def busiest_hosts(jobs: Iterable[Mapping[str, Any]], most: int = 10) -> list[HostLoad]:
    """The hosts with the most jobs, with how many of them are still to run or running."""
    total: Counter[str] = Counter()
    active: Counter[str] = Counter()
    for job in jobs:
        host = urlsplit(job["request"]["url"]).hostname
        if job["state"] == "REJECTED" or not host:  # a refused submission asked no host
            continue
        total[host] += 1
        active[host] += job["state"] in ACTIVE
    return [HostLoad(host=host, jobs=count, active=active[host]) for host, count in total.most_common(most)]


def states_of(jobs: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    return dict(sorted(Counter(job["state"] for job in jobs).items()))


@dataclass
class ClusterMetrics:
    """Jobs by state and consumer lag by topic, summed over every worker's metrics."""

    jobs: Counter[str]
    lag: Counter[str]

    def behind(self) -> list[str]:
        return sorted(topic for topic, records in self.lag.items() if records >= LAG_BEHIND_RECORDS)


def cluster_metrics(expositions: Sequence[str]) -> ClusterMetrics:
    jobs: Counter[str] = Counter()
    lag: Counter[str] = Counter()
    for text in expositions:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "scrapestream_jobs":
                    jobs[sample.labels["state"]] += int(sample.value)
                elif sample.name == "scrapestream_consumer_lag":
                    lag[sample.labels["topic"]] += int(sample.value)
    return ClusterMetrics(jobs, lag)


def partitions_by_worker(owners: Mapping[int, str], peers: Iterable[str]) -> dict[str, list[int]]:
    """Each worker's commands partitions (a worker that holds none is listed with none)."""
    held: dict[str, list[int]] = {url: [] for url in peers}
    for partition, url in sorted(owners.items()):
        held.setdefault(url, []).append(partition)
    return held


def dead_letters_by_failure(jobs: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Dead-lettered jobs grouped by their failure code, the largest group first."""
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for job in jobs:
        failure = job.get("failure") or {}
        groups[failure.get("code") or "UNKNOWN"].append(job)
    return dict(sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])))


def _completed_at(job: Mapping[str, Any]) -> datetime | None:
    at = job.get("completed_at")
    return None if at is None else datetime.fromisoformat(at)
