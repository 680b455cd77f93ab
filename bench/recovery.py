"""Recovery of an empty worker: from the whole events log, and from the snapshot topic.

    .venv/bin/python -m bench.recovery --jobs 100000

The jobs are submitted and fetched through `decide` (as `bench.fold` does) and their events
appended to one events partition of the embedded broker. `log`: an empty store folds the whole
partition (a worker without snapshots). Then that store's snapshots are written to the snapshot
topic, and `snapshot`: another empty store restores them and folds the events after the mark (a
worker on an empty data directory when the log is bounded). Prints one JSON line of seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from aiokafka import TopicPartition

from bench.fold import POLICY, append_log, one_partition, run_fold
from projections.jobstore import JobStore
from projections.storage.rocks import RocksStore
from streams.broker.compat import EMBEDDED_TANSU
from streams.broker.embedded import EmbeddedBroker
from streams.readers.events_log import fold_log
from streams.readers.snapshots import Snapshots
from streams.runtime.publisher import Publisher


async def measure(jobs: int, scratch: Path) -> dict[str, object]:
    _, log = run_fold(jobs, scratch / "decided")
    async with EmbeddedBroker() as broker:
        settings = await one_partition(broker.bootstrap, "recovery")
        publisher = Publisher(broker.access, EMBEDDED_TANSU)
        await publisher.start()
        try:
            await append_log(publisher, settings, log)
            events = TopicPartition(settings.topic("events"), 0)

            from_log = JobStore(RocksStore(scratch / "from-log"), POLICY)
            started = time.perf_counter()
            await fold_log(settings, events, 0, len(log), from_log)
            log_s = time.perf_counter() - started

            counters: Counter[str] = Counter()
            writer = Snapshots(settings, EMBEDDED_TANSU, from_log, publisher, lambda: [0], counters)
            started = time.perf_counter()
            while await writer.write_round():
                pass
            write_s = time.perf_counter() - started
            from_log.close()

            restored = JobStore(RocksStore(scratch / "from-snapshots"), POLICY)
            reader = Snapshots(settings, EMBEDDED_TANSU, restored, publisher, lambda: [0], counters)
            started = time.perf_counter()
            assert await reader.restore(0)
            replayed = await fold_log(settings, events, restored.events_offset(0), len(log), restored)
            snapshot_s = time.perf_counter() - started
            restored.close()
        finally:
            await publisher.stop()
    return {
        "jobs": jobs,
        "events": len(log),
        "recover_from_log_s": round(log_s, 1),
        "write_snapshots_s": round(write_s, 1),
        "recover_from_snapshots_s": round(snapshot_s, 1),
        "events_read_after_snapshots": replayed,
        "snapshots_restored": counters["recovery.snapshots_restored"],
    }


def main(jobs: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as scratch:
        return asyncio.run(measure(jobs, Path(scratch)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    arguments = parser.parse_args()
    sys.stdout.write(json.dumps(main(arguments.jobs)) + "\n")
