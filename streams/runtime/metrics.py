"""The worker's Prometheus metrics: counters moved by the stages, gauges read at scrape time."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from projections.lifecycle.attempts import recorded_attempt
from schemas.events import CheckRecorded, CheckScheduled, Event
from streams.runtime.tracing import SPAN_COUNTS

FETCH_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
LATENESS_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
HTTP_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """One registry per worker (several workers may share a process in tests)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # The standard process_*, python_info and python_gc_* families, as any Prometheus client has.
        ProcessCollector(registry=self.registry)
        self.registry.register(PLATFORM_COLLECTOR)
        self.registry.register(GC_COLLECTOR)
        self.registry.register(SPAN_COUNTS)  # the process's, whichever worker exports them
        self.http_requests = Histogram(
            "scrapestream_http_request_duration_seconds",
            "HTTP API requests this worker answered, by method, route and status",
            ["method", "route", "status"],
            buckets=HTTP_BUCKETS_S,
            registry=self.registry,
        )
        self.events_folded = Counter(
            "scrapestream_events_folded",
            "Events this worker decided and folded into its store, by type",
            ["type"],
            registry=self.registry,
        )
        self.attempts = Counter(
            "scrapestream_attempts",
            "Attempts recorded by this worker's lifecycle, by outcome and failure code",
            ["outcome", "failure_code"],
            registry=self.registry,
        )
        self.fetch_seconds = Histogram(
            "scrapestream_fetch_duration_seconds",
            "Wall time of each fetch this worker's executor ran",
            buckets=FETCH_BUCKETS_S,
            registry=self.registry,
        )
        self.callbacks = Counter(
            "scrapestream_callback_deliveries",
            "Callback delivery tries by result",
            ["result"],
            registry=self.registry,
        )
        self.monitor_checks = Counter(
            "scrapestream_monitor_checks",
            "Monitors' checks this worker's lifecycle decided: scheduled (due and made a job), missed "
            "(due times collapsed into a later check), and each recorded one by what it found",
            ["outcome"],
            registry=self.registry,
        )
        self.monitor_lateness = Histogram(
            "scrapestream_monitor_check_lateness_seconds",
            "How long after its due time each check was made a job",
            buckets=LATENESS_BUCKETS_S,
            registry=self.registry,
        )

    def observe_events(self, events: Sequence[Event]) -> None:
        """Counted per batch: one increment per event type, not per event."""
        kinds = Tally(type(event).__name__ for event in events)
        for kind, count in kinds.items():
            self.events_folded.labels(kind).inc(count)
        if kinds["AttemptRecorded"] or kinds["JobSucceeded"]:  # a success holds its attempt
            outcomes = Tally(
                (attempt.outcome.value, "" if attempt.failure is None else attempt.failure.code)
                for event in events
                if (attempt := recorded_attempt(event)) is not None
            )
            for (outcome, code), count in outcomes.items():
                self.attempts.labels(outcome, code).inc(count)
        if kinds["CheckScheduled"] or kinds["CheckRecorded"]:
            self._observe_checks(events)

    def _observe_checks(self, events: Sequence[Event]) -> None:
        for event in events:
            if isinstance(event, CheckScheduled):
                self.monitor_checks.labels("scheduled").inc()
                self.monitor_checks.labels("missed").inc(event.missed)
                self.monitor_lateness.observe((event.occurred_at - event.due_at).total_seconds())
            elif isinstance(event, CheckRecorded):
                self.monitor_checks.labels(_check_outcome(event)).inc()

    def watch(self, collector: Collector) -> None:
        self.registry.register(collector)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _check_outcome(check: CheckRecorded) -> str:
    if check.change is not None:
        return "changed"
    return "failed" if check.detail else "unchanged"


class ScrapeTimeGauges(Collector):
    """Values read when Prometheus scrapes: jobs by state, dead input, consumer lag, worker counters."""

    def __init__(
        self,
        jobs_by_state: Callable[[], Tally[str]],
        counters: Tally[str],
        lag: Callable[[], dict[tuple[str, int], int]],
    ) -> None:
        self._jobs_by_state = jobs_by_state
        self._counters = counters
        self._lag = lag

    def collect(self) -> Iterator[GaugeMetricFamily]:
        jobs = GaugeMetricFamily(
            "scrapestream_jobs", "Jobs in the partitions this worker owns, by state", labels=["state"]
        )
        for state, count in sorted(self._jobs_by_state().items()):
            jobs.add_metric([state], count)
        yield jobs
        yield self._counted(
            "dead_input.",
            "scrapestream_dead_input_records",
            "Input records this worker sent to dead input since it started, by source topic",
            "topic",
        )
        yield self._counted(
            "maintenance.",
            "scrapestream_maintenance_purged",
            "What this worker's maintenance purged since it started (histories_refused: purges refused)",
            "kind",
        )
        yield self._counted(
            "transactions.",
            "scrapestream_transactions",
            "Transactions this worker ended since it started (exactly_once), by how: committed, aborted,"
            " fenced (the partition had moved to another worker)",
            "result",
        )
        yield self._counted(
            "commands.",
            "scrapestream_commands_sent",
            "Commands this worker's intake, executor and outbox sent its lifecycle since it started, by"
            " how: handed_over (to its own lifecycle, holding the job's partition: no record on the"
            " commands topic), published, or handed_back (handed over, then published because the"
            " job's partition moved first)",
            "how",
        )
        yield self._counted(
            "due.",
            "scrapestream_due_work_sent",
            "Due work this worker's lifecycle dispatched since it started, by how: handed_over (to its own"
            " executor, holding the due partition: no record on the due topic), published, or handed_back",
            "how",
        )
        yield self._counted(
            "registry.",
            "scrapestream_registry_lookups",
            "Writer schemas this worker asked its schema registry for since it started, by result: found,"
            " missing (no such id), refused (not a scrapestream record, or a shape unsafe to decode with)",
            "result",
        )
        for kind, what in (
            ("records", "Records"),
            ("batches", "Record batches"),
            ("bytes", "Bytes of record batches"),
        ):
            yield self._counted(
                f"produced.{kind}.",
                f"scrapestream_produced_{kind}",
                f"{what} this worker's publisher wrote since it started, by topic",
                "topic",
            )
        lag = GaugeMetricFamily(
            "scrapestream_consumer_lag",
            "Records not yet consumed, per topic-partition this worker is assigned",
            labels=["topic", "partition"],
        )
        for (topic, partition), behind in sorted(self._lag().items()):
            lag.add_metric([topic, str(partition)], behind)
        yield lag

    def _counted(self, prefix: str, name: str, documentation: str, label: str) -> GaugeMetricFamily:
        """The worker counters named `<prefix><value>`, one sample per value of `label`."""
        family = GaugeMetricFamily(name, documentation, labels=[label])
        for counter, count in sorted(self._counters.items()):
            if counter.startswith(prefix):
                family.add_metric([counter.removeprefix(prefix)], count)
        return family
