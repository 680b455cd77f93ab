"""The generated Avro codec (`schemas.binary`) against fastavro's compiled (Cython) reader and writer,
on the records a job writes, one golden record of each (`tests/golden/`).

    .venv/bin/python -m bench.avro_codec

Both write the same bytes (checked on every record before timing). fastavro reads to a dict; the
worker needs the msgspec record, so its conversion is timed as well. Prints one JSON line per record:
µs to encode and to decode, best of `REPEATS` runs of `ROUNDS` each. Not a test; figures go to
docs/PERFORMANCE.md with the command.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro._read
import fastavro._write
import msgspec

from schemas import binary
from schemas.classes import RECORD_CLASSES
from schemas.codec import decode
from schemas.registry import current_schemas
from schemas.types import Record

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden"
JOB_RECORDS = (
    "SubmitJob",
    "JobAccepted",
    "DueWork",
    "StartAttempt",
    "AttemptStarted",
    "ReportAttempt",
    "JobSucceeded",
    "JobCompleted",
    "SubmissionAnswer",
    "CheckRecorded",
)
ROUNDS = 3_000
REPEATS = 5


def golden_records() -> dict[str, Record]:
    """The newest golden record of each name, decoded to the current record."""
    found: dict[str, Record] = {}
    for path in sorted(GOLDEN.glob("records-v*.jsonl"), key=lambda p: int(p.stem.split("-v")[1])):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if entry["record"] in JOB_RECORDS:
                found[entry["record"]] = decode(bytes.fromhex(entry["hex"]))
    return found


def best_us(work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        for _ in range(ROUNDS):
            work()
        best = min(best, time.perf_counter() - started)
    return round(best / ROUNDS * 1e6, 2)


def measure(name: str, record: Record) -> dict[str, Any]:
    schema = current_schemas()[name].parsed
    encode_generated, decode_generated = binary.encoder(name), binary.decoder(name)

    def generated_body() -> bytes:
        out = bytearray()
        encode_generated(record, out)
        return bytes(out)

    body = generated_body()

    def fastavro_dict() -> Any:
        return fastavro._read.schemaless_reader(io.BytesIO(body), schema, None)

    as_dict = fastavro_dict()

    def fastavro_body() -> bytes:
        out = io.BytesIO()
        fastavro._write.schemaless_writer(out, schema, as_dict)
        return out.getvalue()

    if fastavro_body() != body:
        raise SystemExit(f"{name}: fastavro writes other bytes than the generated codec")
    cls = RECORD_CLASSES[name]
    return {
        "record": name,
        "bytes": len(body),
        "generated_encode_us": best_us(generated_body),
        "generated_decode_us": best_us(lambda: decode_generated(body, 0)),
        "fastavro_encode_us": best_us(fastavro_body),
        "fastavro_decode_us": best_us(fastavro_dict),
        "fastavro_decode_to_record_us": best_us(lambda: msgspec.convert(fastavro_dict(), cls)),
    }


def main() -> None:
    for name, record in golden_records().items():
        print(json.dumps(measure(name, record)), flush=True)


if __name__ == "__main__":
    main()
