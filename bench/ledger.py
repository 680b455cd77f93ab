"""Fold rate of the route ledger: what every worker pays for each request of a metered route.

    .venv/bin/python -m bench.ledger --requests 50000

Encodes a `RouteReserved` and a `RouteReconciled` per request of one budgeted, priced route (as
executors write them), then folds them in log order through a `LedgerReader` as it folds what
it reads from `scrapestream.routes`: decode, check, decide the reservation, settle it. No broker:
the fold alone, which every worker runs for every metered request of the deployment
(docs/CAPACITY.md). Prints one JSON line of records per second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from uuid import uuid4

from projections.ledger import Metering
from schemas.codec import encode
from schemas.work import RouteReconciled, RouteReserved
from streams.broker.access import plaintext
from streams.broker.compat import EMBEDDED_TANSU
from streams.cli.serve import collect_rarely
from streams.readers.ledger import LedgerReader

ROUTE = "proxy-pool"
METERING = Metering(price_per_gb=Decimal("8"), budget=Decimal("1000000"), period_s=86_400)


def records(requests: int) -> list[bytes]:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    values = []
    for n in range(requests):
        reservation_id, at = uuid4(), start + timedelta(milliseconds=n)
        values.append(
            encode(
                RouteReserved(
                    reservation_id=reservation_id,
                    route=ROUTE,
                    job_id=uuid4(),
                    attempt_number=1,
                    estimated=Decimal("0.001"),
                    requested_at=at,
                )
            )
        )
        values.append(
            encode(
                RouteReconciled(
                    reservation_id=reservation_id,
                    route=ROUTE,
                    actual=Decimal("0.000016"),
                    bytes=2048,
                    browser_seconds=Decimal(0),
                    reconciled_at=at,
                )
            )
        )
    return values


async def main(requests: int) -> dict[str, object]:
    collect_rarely()  # as `scrapestream worker` runs
    values = records(requests)
    reader = LedgerReader(plaintext("127.0.0.1:9"), "scrapestream.routes", EMBEDDED_TANSU, {ROUTE: METERING})
    started = time.perf_counter()
    for offset, value in enumerate(values):
        reader._fold(value, 0, offset)  # the reader's fold, without its consumer
    elapsed = time.perf_counter() - started
    ledger = reader.ledgers[ROUTE]
    await reader.stop()
    assert reader.skipped == 0
    assert ledger.granted == requests
    return {
        "requests": requests,
        "records": len(values),
        "records_per_s": round(len(values) / elapsed),
        "metered_requests_per_s": round(requests / elapsed),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50_000)
    arguments = parser.parse_args()
    sys.stdout.write(json.dumps(asyncio.run(main(arguments.requests))) + "\n")
