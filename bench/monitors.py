"""Monitors at scale on `scrapestream dev`: many monitors checked on an interval, sustained.

    .venv/bin/python -m bench.monitors --monitors 10000 --every 60 --seconds 300

Starts `scrapestream dev` (embedded broker, one worker, HTTP API) in a scratch directory and a
loopback origin on 16 addresses; publishes the `CreateMonitor` commands straight to the commands
topic, waits one interval for the first checks to settle into their schedule, then measures for
`--seconds`: checks made a job per second, how late each was made (its `CheckScheduled` time less
its due time: p50, p99, max, read from the events topic), missed due times, and the CPU per check of
the dev process and of the broker. Prints one JSON line. Not a test; figures go to
docs/PERFORMANCE.md with the command.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

from aiokafka import TopicPartition

from bench.e2e import percentile
from bench.idle import start_dev
from bench.processes import origin_url, start_origin, tree_cpu_seconds
from projections.lifecycle.monitors import monitor_id_for
from schemas.codec import decode
from schemas.commands import CreateMonitor
from schemas.errors import CodecError
from schemas.events import CheckRecorded, CheckScheduled
from schemas.records import MonitorSchedule, MonitorSpec, Request
from streams.broker.access import plaintext
from streams.broker.compat import EMBEDDED_TANSU, end_offsets, records_between
from streams.broker.embedded import free_loopback_port
from streams.runtime.publisher import Publisher, outgoing

HOSTS = 16
CREATE_BATCH = 1_000


async def main(monitors: int, every_s: int, seconds: float) -> dict[str, object]:
    port = free_loopback_port()
    origin = await start_origin(port, HOSTS)
    directory = Path(tempfile.mkdtemp(prefix="scrapestream-monitors-"))
    dev, state = await start_dev(directory)
    bootstrap = str(state["kafka_bootstrap"])
    prefix = str(state.get("topic_prefix", "scrapestream"))
    try:
        pids = {"dev": dev.pid, "broker": int(str(state["broker_pid"]))}
        created_at = time.monotonic()
        await create(bootstrap, prefix, port, monitors, every_s)
        created_s = time.monotonic() - created_at
        await asyncio.sleep(every_s + 5)  # the first checks (a baseline each) settle into the schedule
        started = datetime.now(UTC)
        before = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
        await asyncio.sleep(seconds)
        after = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
        memory = {name: resident_mib(pid) for name, pid in pids.items()}
        ended = datetime.now(UTC)
        scheduled, recorded = await checks_between(bootstrap, f"{prefix}.events", started, ended)
    finally:
        await dev.stop()
        await origin.stop()
    lateness_ms = [(check.occurred_at - check.due_at).total_seconds() * 1000 for check in scheduled]
    made = len(scheduled)
    return {
        "monitors": monitors,
        "every_s": every_s,
        "measured_s": seconds,
        "create_s": round(created_s, 1),
        "due_per_s": round(monitors / every_s, 1),
        "checks_made_per_s": round(made / seconds, 1),
        "checks_recorded_per_s": round(len(recorded) / seconds, 1),
        "missed_due_times": sum(check.missed for check in scheduled),
        "lateness_ms_p50": round(percentile(lateness_ms, 0.5), 1) if lateness_ms else None,
        "lateness_ms_p99": round(percentile(lateness_ms, 0.99), 1) if lateness_ms else None,
        "lateness_ms_max": round(max(lateness_ms), 1) if lateness_ms else None,
        "cpu_ms_per_check": {
            name: round((after[name] - before[name]) * 1000 / max(len(recorded), 1), 3) for name in pids
        },
        "cpu_core_percent": {name: round((after[name] - before[name]) * 100 / seconds, 1) for name in pids},
        "rss_mib": {name: now for name, (now, _) in memory.items()},
        "peak_rss_mib": {name: peak for name, (_, peak) in memory.items()},
    }


def resident_mib(pid: int) -> tuple[float, float]:
    """A process's resident memory now and at its peak (`VmRSS`, `VmHWM`), in MiB."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in lines if ":" in line)

    def mib(name: str) -> float:
        return round(int(fields[name].split()[0]) / 1024, 1)

    return mib("VmRSS"), mib("VmHWM")


async def create(bootstrap: str, prefix: str, port: int, monitors: int, every_s: int) -> None:
    """Every monitor's `CreateMonitor`, keyed by its id, on the commands topic (as the API sends them)."""
    publisher = Publisher(plaintext(bootstrap), EMBEDDED_TANSU)
    await publisher.start()
    try:
        for first in range(0, monitors, CREATE_BATCH):
            batch = []
            for number in range(first, min(first + CREATE_BATCH, monitors)):
                url = origin_url(port, HOSTS, number, f"page-{number}")
                spec = MonitorSpec(
                    request=Request(url=url), schedule=MonitorSchedule(every_s=every_s, jitter_s=every_s)
                )
                command = CreateMonitor(
                    command_id=uuid4(), caller_identity="bench", name=f"m{number}", spec=spec
                )
                monitor_id = monitor_id_for(command.caller_identity, command.name)
                batch.append(outgoing(f"{prefix}.commands", monitor_id, command))
            await publisher.send_all(batch)
    finally:
        await publisher.stop()


async def checks_between(
    bootstrap: str, topic: str, started: datetime, ended: datetime
) -> tuple[list[CheckScheduled], list[CheckRecorded]]:
    """The checks made, and recorded, between `started` and `ended`, as the events topic holds them."""
    partitions = [TopicPartition(topic, 0)]
    ends = await end_offsets(plaintext(bootstrap), partitions, EMBEDDED_TANSU)
    scheduled: list[CheckScheduled] = []
    recorded: list[CheckRecorded] = []
    for partition in partitions:
        async for records in records_between(plaintext(bootstrap), partition, None, ends[partition]):
            for record in records:
                try:
                    event = decode(record.value or b"")
                except CodecError:
                    continue
                inside = (
                    isinstance(event, CheckScheduled | CheckRecorded) and started <= event.occurred_at < ended
                )
                if inside and isinstance(event, CheckScheduled):
                    scheduled.append(event)
                elif inside and isinstance(event, CheckRecorded):
                    recorded.append(event)
    return scheduled, recorded


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--monitors", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=60, help="seconds between a monitor's checks")
    parser.add_argument("--seconds", type=float, default=300.0, help="how long the steady state is measured")
    arguments = parser.parse_args()
    result = asyncio.run(main(arguments.monitors, arguments.every, arguments.seconds))
    sys.stdout.write(json.dumps(result) + "\n")
