"""An outside executor for the `test.remote` job type, written without scrapestream's package: plain
aiokafka, fastavro and cryptography, and the `.avsc` files of the contract. It reads the type's due
topic and reports each job through the submit topic, signed: its start first, then renewals while
it runs, then the outcome its URL's first segment says: `/good/<title>` reports the title (as
`remote`), `/bad/...` a result in another schema, `/fail/...` a failure of its own, `/stranger/...`
a good result signed by a principal not allowed to run the type, `/die/...` nothing after its start
(a run that died), `/slow/...` renews until its lease is revoked (then stops, reporting nothing),
`/big/<n>` a title of n letters, uploaded to the work's `upload_url` and reported by its key.
A `LeaseRevoked` on the due topic stops the run it names.

Run as a script; the settings come from the environment (see `main`).
"""

import asyncio
import base64
import io
import json
import os
import ssl
import sys
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import aiohttp
import fastavro
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastavro.schema import fingerprint, load_schema, to_parsing_canonical_form

MARKER = b"\xc3\x01"
LABEL = b"scrapestream-command/2\n"
BASE_REPORT = {
    "result_body": None,
    "failure_code": None,
    "failure_message": "",
    "retryable": False,
    "elapsed_ms": 5,
    "kind": "ATTEMPT",
    "result_key": None,
}
OTHER_SCHEMA = {"type": "record", "name": "NotTheSummary", "fields": [{"name": "title", "type": "string"}]}


def header_of(schema):
    return MARKER + bytes.fromhex(fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))


def single_object(schema, record):
    header = header_of(schema)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, record)
    return header + out.getvalue()


def signed(deployment, topic, principal, key, value):
    message = LABEL + b"\n".join([deployment.encode(), topic.encode(), principal.encode()]) + b"\n" + value
    return [
        ("scrapestream-principal", principal.encode()),
        ("scrapestream-signature", base64.b64encode(key.sign(message))),
    ]


class Executor:
    """Runs each due work as its own task; revocations read from the same topic stop them."""

    def __init__(self, env, producer):
        avsc = env["AVSC_DIR"]
        self.env, self.producer = env, producer
        self.due_schema = load_schema(os.path.join(avsc, "scrapestream.v1.DueWork.avsc"))
        self.report_schema = load_schema(os.path.join(avsc, "scrapestream.v1.ReportRemoteAttempt.avsc"))
        self.revoked_schema = load_schema(os.path.join(avsc, "scrapestream.v1.LeaseRevoked.avsc"))
        self.result_schema = fastavro.parse_schema(json.loads(env["RESULT_SCHEMA"]))
        self.keys = {
            name: Ed25519PrivateKey.from_private_bytes(base64.b64decode(text))
            for name, text in json.loads(env["KEYS"]).items()
        }
        self.revoked = set()
        self.running = set()

    def take(self, value):
        """A record of the due topic: work to start, or a revocation to honour."""
        for schema, act in ((self.revoked_schema, self.revoke), (self.due_schema, self.start)):
            header = header_of(schema)
            if value.startswith(header):
                act(fastavro.schemaless_reader(io.BytesIO(value[len(header) :]), schema))

    def revoke(self, revocation):
        self.revoked.add(revocation["lease_id"])

    def start(self, work):
        task = asyncio.create_task(self.run(work))
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def send(self, report, principal="remote"):
        report = BASE_REPORT | {"command_id": str(uuid.uuid4())} | report
        report["expires_at"] = datetime.now(UTC) + timedelta(minutes=5)
        value = single_object(self.report_schema, report)
        env = self.env
        headers = signed(env["DEPLOYMENT"], env["SUBMIT_TOPIC"], principal, self.keys[principal], value)
        await self.producer.send_and_wait(
            env["SUBMIT_TOPIC"], value, key=report["job_id"].encode(), headers=headers
        )

    async def run(self, work):
        kind, _, rest = urlsplit(work["request"]["url"]).path.strip("/").partition("/")
        lease = {
            "job_id": str(work["job_id"]),
            "job_type": work["job_type"],
            "attempt_number": work["attempt_number"],
            "lease_id": str(work["lease_id"]),
        }
        principal = "stranger" if kind == "stranger" else "remote"
        await self.send(lease | {"kind": "START"}, principal)
        if kind == "die":
            print("died", lease["job_id"], flush=True)
            return
        rounds = 300 if kind == "slow" else 1
        for _ in range(rounds):
            await asyncio.sleep(work["renew_interval_ms"] / 1000 if kind == "slow" else 0.3)
            if work["lease_id"] in self.revoked:
                print("revoked", lease["job_id"], flush=True)
                return
            if kind == "slow":
                await self.send(lease | {"kind": "RENEWAL"})
        outcome = self.outcome(kind, rest)
        if kind == "big":
            async with (
                aiohttp.ClientSession() as http,
                http.put(work["upload_url"], data=outcome.pop("result_body")) as answer,
            ):
                print("uploaded", answer.status, work["upload_key"], flush=True)
            outcome["result_key"] = work["upload_key"]
        await self.send(lease | outcome, principal)
        print("reported", kind, lease["job_id"], flush=True)

    def outcome(self, kind, rest):
        if kind == "fail":
            return {"failure_code": "SOURCE_GONE", "failure_message": "the source is gone"}
        if kind == "bad":
            return {"result_body": single_object(fastavro.parse_schema(OTHER_SCHEMA), {"title": rest})}
        title = "x" * int(rest) if kind == "big" else rest
        return {"result_body": single_object(self.result_schema, {"title": title, "words": len(title)})}


def login(env) -> dict:
    """The cluster's login as its operators gave it (`SECURITY_PROTOCOL`, `SASL_*`, `SSL_CA_FILE`)."""
    protocol = env.get("SECURITY_PROTOCOL", "PLAINTEXT")
    options = {"bootstrap_servers": env["BOOTSTRAP"], "security_protocol": protocol}
    if protocol.startswith("SASL_"):
        options |= {
            "sasl_mechanism": env["SASL_MECHANISM"],
            "sasl_plain_username": env["SASL_USERNAME"],
            "sasl_plain_password": env["SASL_PASSWORD"],
        }
    if protocol.endswith("SSL"):
        options["ssl_context"] = ssl.create_default_context(cafile=env.get("SSL_CA_FILE"))
    return options


async def main() -> None:
    env = os.environ
    consumer = AIOKafkaConsumer(
        env["DUE_TOPIC"],
        **login(env),
        group_id=env["GROUP"],
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    producer = AIOKafkaProducer(**login(env), enable_idempotence=False)
    await consumer.start()
    await producer.start()
    assert not {name.split(".")[0] for name in sys.modules} & {"streams", "schemas", "projections"}
    executor = Executor(env, producer)
    print("ready", flush=True)
    try:
        async for record in consumer:
            executor.take(record.value)
    finally:
        for task in executor.running:
            task.cancel()
        await producer.stop()
        await consumer.stop()


if __name__ == "__main__":
    asyncio.run(main())
