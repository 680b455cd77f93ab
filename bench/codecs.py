"""What each Kafka codec costs a batch of completions: bytes on the wire and CPU to build and read it.

Completions with random ids and digests (they do not compress), 500 to a batch as a worker writes
them under load, and 8 to a batch as a few jobs ending together do.
`python -m bench.codecs` prints one row per codec and batch size.
"""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, datetime, timedelta
from uuid import uuid4

from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.default_records import DefaultRecordBatch

from schemas.codec import encode
from schemas.enums import JobStatus
from schemas.events import JobCompleted
from schemas.records import Artifact

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
ROUNDS = 40


def records(count: int) -> list[bytes]:
    """Completions as a worker writes them: random ids and digests, one host, one caller."""
    now = datetime.now(UTC)
    made = []
    for index in range(count):
        job_id = uuid4()
        digest = hashlib.sha256(job_id.bytes).hexdigest()
        artifact = Artifact(
            artifact_id=uuid4(),
            key=f"sha256/{digest[:2]}/{digest}",
            content_type="text/html; charset=utf-8",
            size_bytes=18_000 + index,
            sha256=digest,
            expires_at=now + timedelta(days=7),
        )
        completed = JobCompleted(
            job_id=job_id,
            caller_identity="catalog-service",
            idempotency_key=digest[:32],
            job_type="http.fetch",
            url=f"https://shop.example.com/products/{index}?page=1",
            status=JobStatus.SUCCEEDED,
            attempt_count=1,
            artifacts=(artifact,),
            completed_at=now,
            labels={"team": "catalog"},
        )
        made.append(encode(completed))
    return made


def measure(codec: str, values: list[bytes]) -> tuple[int, float, float]:
    """Bytes of the batch, µs to build it and µs to read it back, each per record."""
    started = time.perf_counter()
    for _ in range(ROUNDS):
        batch = BatchBuilder(1_000_000, CODECS[codec])
        for value in values:
            batch.append(key=value[:36], value=value, timestamp=None)
        data = bytes(batch._build())  # what the producer sends
    built = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(ROUNDS):
        assert len(list(DefaultRecordBatch(data))) == len(values)
    read = time.perf_counter() - started
    per = ROUNDS * len(values)
    return len(data) // len(values), built / per * 1e6, read / per * 1e6


def main() -> None:
    print(f"{'codec':<8}{'batch':>6}{'B/record':>10}{'build µs':>10}{'read µs':>9}")
    for size in (500, 8):
        values = records(size)
        for codec in CODECS:
            per_record, build_us, read_us = measure(codec, values)
            print(f"{codec:<8}{size:>6}{per_record:>10}{build_us:>10.1f}{read_us:>9.1f}")


if __name__ == "__main__":
    main()
