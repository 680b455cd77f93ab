"""The worker's probes and metrics, made from its processes' own answers."""

from __future__ import annotations

from collections import Counter
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

Answer = dict[str, Any] | None  # a process's JSON answer; None when it gave none


def health(answers: dict[int, Answer], processes: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """Live while every process that serves answers: a process being restarted is the supervisor's
    work, not a reason to restart the whole worker. Probes need no token: no pid or address here."""
    counters: Counter[str] = Counter()
    owned: set[int] = set()
    silent = []
    for view in processes:
        answer = answers.get(view["index"])
        if answer is None:
            if view["state"] == "serving":
                silent.append(view["index"])
            continue
        owned.update(answer.get("owned_partitions", []))
        counters.update(answer.get("counters", {}))
    body = {
        "status": "ok" if not silent else "unresponsive",
        "owned_partitions": sorted(owned),
        "counters": dict(sorted(counters.items())),
    }
    return (200 if not silent else 503), body


def readiness(answers: dict[int, Answer], processes: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """Ready when every process is."""
    assigned: set[int] = set()
    catching_up: set[int] = set()
    reasons: list[str] = []
    reachable = True
    for view in processes:
        answer = answers.get(view["index"])
        if answer is None:
            reasons.append(f"process {view['index']} is {view['state']}" + _after(view))
            continue
        assigned.update(answer.get("assigned_partitions", []))
        catching_up.update(answer.get("catching_up", []))
        reachable = reachable and bool(answer.get("broker_reachable"))
        reasons.extend(f"process {view['index']}: {reason}" for reason in answer.get("reasons", []))
    body = {
        "ready": not reasons,
        "broker_reachable": reachable,
        "assigned_partitions": sorted(assigned),
        "catching_up": sorted(catching_up),
        "reasons": reasons,
    }
    return (200 if not reasons else 503), body


def _after(view: dict[str, Any]) -> str:
    return "" if view.get("last_exit") is None else f" (it {view['last_exit']})"


def metrics(expositions: dict[int, str]) -> bytes:
    """One exposition: each family once, each sample labelled with the `process` it came from."""
    families: dict[str, Metric] = {}
    for index, text in sorted(expositions.items()):
        for family in text_string_to_metric_families(text):
            merged = families.get(family.name)
            if merged is None:
                merged = families[family.name] = Metric(family.name, family.documentation, family.type)
            for sample in family.samples:
                labels = {**sample.labels, "process": str(index)}
                merged.samples.append(sample._replace(labels=labels))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(list(families.values())))
    return generate_latest(registry)


class _Families:
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families
