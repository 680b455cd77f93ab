"""An outside executor for the `test.remote` job type, written without scrapestream's package: plain
aiokafka, fastavro and cryptography, and the `.avsc` files of the contract. It reads the type's due
topic and reports each job through the submit topic, signed, as its URL's first segment says:
`/good/<title>` reports the title (as `remote`), `/bad/...` a result in another schema, `/fail/...`
a failure of its own, `/stranger/...` a good result signed by a principal not allowed to run the type.

Run as a script; the settings come from the environment (see `main`).
"""

import asyncio
import base64
import io
import json
import os
import sys
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import fastavro
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastavro.schema import fingerprint, load_schema, to_parsing_canonical_form

MARKER = b"\xc3\x01"
LABEL = b"scrapestream-command/2\n"
OTHER_SCHEMA = {"type": "record", "name": "NotTheSummary", "fields": [{"name": "title", "type": "string"}]}


def single_object(schema, record):
    header = MARKER + bytes.fromhex(fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, record)
    return header + out.getvalue()


def signed(deployment, topic, principal, key, value):
    message = LABEL + b"\n".join([deployment.encode(), topic.encode(), principal.encode()]) + b"\n" + value
    return [
        ("scrapestream-principal", principal.encode()),
        ("scrapestream-signature", base64.b64encode(key.sign(message))),
    ]


async def main() -> None:
    env = os.environ
    avsc = env["AVSC_DIR"]
    due_schema = load_schema(os.path.join(avsc, "scrapestream.v1.DueWork.avsc"))
    report_schema = load_schema(os.path.join(avsc, "scrapestream.v1.ReportRemoteAttempt.avsc"))
    result_schema = fastavro.parse_schema(json.loads(env["RESULT_SCHEMA"]))
    due_header = MARKER + bytes.fromhex(fingerprint(to_parsing_canonical_form(due_schema), "CRC-64-AVRO"))
    keys = {
        name: Ed25519PrivateKey.from_private_bytes(base64.b64decode(text))
        for name, text in json.loads(env["KEYS"]).items()
    }
    consumer = AIOKafkaConsumer(
        env["DUE_TOPIC"],
        bootstrap_servers=env["BOOTSTRAP"],
        group_id=env["GROUP"],
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    producer = AIOKafkaProducer(bootstrap_servers=env["BOOTSTRAP"], enable_idempotence=False)
    await consumer.start()
    await producer.start()
    assert not {name.split(".")[0] for name in sys.modules} & {"streams", "schemas", "projections"}
    print("ready", flush=True)
    try:
        async for record in consumer:
            if not record.value.startswith(due_header):
                continue  # a revocation, not work
            work = fastavro.schemaless_reader(io.BytesIO(record.value[len(due_header) :]), due_schema)
            kind, _, rest = urlsplit(work["request"]["url"]).path.strip("/").partition("/")
            report = {
                "command_id": str(uuid.uuid4()),
                "job_id": str(work["job_id"]),
                "job_type": work["job_type"],
                "attempt_number": work["attempt_number"],
                "lease_id": str(work["lease_id"]),
                "result": None,
                "failure_code": None,
                "failure_message": "",
                "retryable": False,
                "elapsed_ms": 5,
                "expires_at": datetime.now(UTC) + timedelta(minutes=5),
            }
            if kind == "fail":
                report["failure_code"], report["failure_message"] = "SOURCE_GONE", "the source is gone"
            elif kind == "bad":
                report["result"] = single_object(fastavro.parse_schema(OTHER_SCHEMA), {"title": rest})
            else:
                report["result"] = single_object(result_schema, {"title": rest, "words": len(rest)})
            principal = "stranger" if kind == "stranger" else "remote"
            value = single_object(report_schema, report)
            headers = signed(env["DEPLOYMENT"], env["SUBMIT_TOPIC"], principal, keys[principal], value)
            await producer.send_and_wait(
                env["SUBMIT_TOPIC"], value, key=report["job_id"].encode(), headers=headers
            )
            print("reported", kind, report["job_id"], flush=True)
    finally:
        await producer.stop()
        await consumer.stop()


if __name__ == "__main__":
    asyncio.run(main())
