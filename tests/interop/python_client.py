"""A Python team's own client of scrapestream's Kafka contract: confluent-kafka, fastavro and
cryptography, and the contract's bundle (`schemas/bundle/scrapestream.v1.avsc`); no scrapestream code.

It submits (signed), matches each record's answer by partition and offset, follows its completion
with `read_committed` and fetches the artifact from the API. With `REGISTRY_URL` set it writes and
reads through the Schema Registry serializers instead (Confluent framing). Prints what it saw as
JSON lines. Settings come from the environment (see `main`). `roundtrip BUNDLE GOLDEN HISTORY` instead
reads every golden record with fastavro alone; `monitor` creates a monitor of `WATCH_URL` and reads
its first changes.
"""

import base64
import hashlib
import io
import json
import os
import sys
import time
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta

import fastavro
from confluent_kafka import Consumer, Producer, TopicPartition
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastavro.schema import fingerprint, to_parsing_canonical_form

MARKER = b"\xc3\x01"
LABEL = b"scrapestream-command/2\n"
PATIENCE_S = 120


def standing_alone(node, definitions, seen):
    if isinstance(node, str):
        if node in definitions and node not in seen:
            return standing_alone(definitions[node], definitions, seen)
        return node
    if isinstance(node, list):
        return [standing_alone(item, definitions, seen) for item in node]
    if node.get("type") in ("record", "enum", "fixed"):
        seen.add(f"{node.get('namespace', 'scrapestream.v1')}.{node['name']}")
    copy = dict(node)
    for key in ("items", "values"):
        if key in copy:
            copy[key] = standing_alone(copy[key], definitions, seen)
    if isinstance(copy.get("type"), (dict, list)):
        copy["type"] = standing_alone(copy["type"], definitions, seen)
    if "fields" in copy:
        copy["fields"] = [dict(f, type=standing_alone(f["type"], definitions, seen)) for f in copy["fields"]]
    return copy


class Contract:
    """The bundle's types, each standing alone, and single-object encoding by hand (it is that simple)."""

    def __init__(self, bundle_path):
        with open(bundle_path) as bundle:
            types = json.load(bundle)
        definitions = {f"{t['namespace']}.{t['name']}": t for t in types}
        # Each type standing alone: a named type written out at its first use, named after that
        # (fastavro's expand_schema writes it out at every use, which Avro refuses for a type used twice).
        expanded = [standing_alone(t, definitions, set()) for t in types]
        self.schemas = {schema["name"].rsplit(".", 1)[-1]: schema for schema in expanded}
        self.writers = {self._fingerprint(schema): schema for schema in expanded}

    @staticmethod
    def _fingerprint(schema):
        return bytes.fromhex(fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))

    def encode(self, name, record):
        schema = self.schemas[name]
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, record)
        return MARKER + self._fingerprint(schema) + out.getvalue()

    def decode(self, name, data):
        if data[:2] != MARKER:
            raise ValueError(f"not single-object encoding: {data[:2].hex()}")
        writer = self.writers[data[2:10]]
        return fastavro.schemaless_reader(io.BytesIO(data[10:]), writer, self.schemas[name])


class RegistryFraming:
    """The Schema Registry serializers, as a team that uses a registry has them."""

    def __init__(self, url, contract, topics):
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        self._context = lambda topic: SerializationContext(topic, MessageField.VALUE)
        client = SchemaRegistryClient({"url": url})
        submit = json.dumps(contract.schemas["SubmitJob"])
        self._serializer = AvroSerializer(
            client, submit, conf={"auto.register.schemas": False, "use.latest.version": True}
        )
        self._deserializer = AvroDeserializer(client)
        self._topics = topics

    def encode(self, name, record):
        return self._serializer(record, self._context(self._topics["submit"]))

    def decode(self, name, data):
        return self._deserializer(data, self._context(self._topics["answers"]))


def sign(env, topic, value):
    key = Ed25519PrivateKey.from_private_bytes(base64.b64decode(env["SIGNING_KEY"]))
    principal = env["PRINCIPAL"]
    message = (
        LABEL + b"\n".join([env["DEPLOYMENT"].encode(), topic.encode(), principal.encode()]) + b"\n" + value
    )
    return [
        ("scrapestream-principal", principal.encode()),
        ("scrapestream-signature", base64.b64encode(key.sign(message))),
    ]


def submission(env, url, idempotency_key):
    now = datetime.now(UTC)
    return {
        "command_id": str(uuid.uuid4()),
        "caller_identity": env["PRINCIPAL"],
        "idempotency_key": idempotency_key,
        "request": {"url": url, "method": "GET", "headers": {}},
        "deadline_at": now + timedelta(minutes=10),
        "expires_at": now + timedelta(minutes=5),
    }


def from_end(consumer, topic):
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    assigned = []
    for partition in partitions:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        assigned.append(TopicPartition(topic, partition, high))
    consumer.assign(assigned)


def security(env):
    """The cluster's login, as its operators gave it: SASL (SCRAM or PLAIN) over TLS, or none."""
    protocol = env.get("SECURITY_PROTOCOL", "PLAINTEXT")
    config = {"bootstrap.servers": env["BOOTSTRAP"], "security.protocol": protocol}
    if protocol.startswith("SASL_"):
        config |= {
            "sasl.mechanisms": env["SASL_MECHANISM"],
            "sasl.username": env["SASL_USERNAME"],
            "sasl.password": env["SASL_PASSWORD"],
        }
    if protocol.endswith("SSL") and env.get("SSL_CA_FILE"):
        config["ssl.ca.location"] = env["SSL_CA_FILE"]
    return config


def consumer_for(env, topic):
    consumer = Consumer(
        security(env)
        | {
            "group.id": f"{env.get('GROUP_PREFIX', 'interop-')}{uuid.uuid4()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    from_end(consumer, topic)
    return consumer


def publish(env, topics, framing):
    """Each case's record on the submit topic; returns the case of each (partition, offset)."""
    producer = Producer(security(env) | {"enable.idempotence": True})
    key = f"interop-{uuid.uuid4()}"
    first = submission(env, env["PAGE_URL"], key)
    cases = {
        "created": (framing.encode("SubmitJob", first), True),
        "repeated": (framing.encode("SubmitJob", first), True),
        "reused_key": (framing.encode("SubmitJob", submission(env, env["OTHER_URL"], key)), True),
        "undecodable": (b"not avro", True),
        "unsigned": (framing.encode("SubmitJob", submission(env, env["PAGE_URL"], None)), False),
    }
    placed = {}
    for name, (value, signed) in cases.items():
        headers = [("scrapestream-correlation-id", f"python-{name}".encode())]
        headers += sign(env, topics["submit"], value) if signed else []

        def delivered(error, message, name=name):
            if error is not None:
                raise RuntimeError(f"{name} not delivered: {error}")
            placed[(message.partition(), message.offset())] = name

        # A repeat and a reuse of the key share the first's key: one partition decides them in order.
        key = "created" if name in ("repeated", "reused_key") else name
        producer.produce(topics["submit"], value, key=key.encode(), headers=headers, on_delivery=delivered)
        producer.flush(30)
    return first, placed


def records(consumer, framing, name):
    """Decoded records as they come, until `PATIENCE_S` has passed."""
    give_up = time.monotonic() + PATIENCE_S
    while time.monotonic() < give_up:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            yield framing.decode(name, message.value())


def answers_to(consumer, framing, placed):
    found = {}
    for answer in records(consumer, framing, "SubmissionAnswer"):
        name = placed.get((answer["source_partition"], answer["source_offset"]))
        if name in found:
            raise RuntimeError(f"a second answer for {name}")
        if name is not None:
            found[name] = answer
        if len(found) == len(placed):
            return found
    raise RuntimeError(f"answers for {sorted(found)} only, of {sorted(placed.values())}")


def fetch(env, artifact_id):
    url = f"{env['API_URL']}/artifacts/{artifact_id}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {env['API_TOKEN']}"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - the API's http(s) URL
        return response.read()


def main():
    env = os.environ
    prefix = env.get("TOPIC_PREFIX", "scrapestream")
    topics = {name: f"{prefix}.{name}" for name in ("submit", "answers", "completions")}
    contract = Contract(env["BUNDLE"])
    framing = RegistryFraming(env["REGISTRY_URL"], contract, topics) if env.get("REGISTRY_URL") else contract
    answers = consumer_for(env, topics["answers"])
    completions = consumer_for(env, topics["completions"])
    first, placed = publish(env, topics, framing)
    found = answers_to(answers, framing, placed)
    for name, answer in found.items():
        shown = {key: answer.get(key) for key in ("answer", "correlation_id", "rejection", "reason")}
        print(
            json.dumps(
                {
                    "case": name,
                    **shown,
                    "command_id": str(answer["command_id"]),
                    "job_id": str(answer["job_id"]),
                }
            )
        )
    job_id = str(found["created"]["job_id"])
    completion = next(
        (c for c in records(completions, framing, "JobCompleted") if str(c["job_id"]) == job_id), None
    )
    if completion is None:
        sys.exit(f"no completion of {job_id}")
    done = {
        "case": "completion",
        "job_id": job_id,
        "command_id": first["command_id"],
        "status": completion["status"],
    }
    done["artifacts"] = len(completion["artifacts"])
    if completion["artifacts"]:
        artifact = completion["artifacts"][0]
        body = fetch(env, artifact["artifact_id"])
        done["artifact_bytes"] = len(body)
        done["artifact_sha256_matches"] = hashlib.sha256(body).hexdigest() == artifact["sha256"]
    print(json.dumps(done))
    answers.close()
    completions.close()


def watch(env):
    """Creates a monitor on the submit topic (signed), matches its answer, and reads its first changes
    from the changes topic: a NEW, then a CHANGED."""
    prefix = env.get("TOPIC_PREFIX", "scrapestream")
    topics = {name: f"{prefix}.{name}" for name in ("submit", "answers", "changes")}
    contract = Contract(env["BUNDLE"])
    answers, changes = consumer_for(env, topics["answers"]), consumer_for(env, topics["changes"])
    now = datetime.now(UTC)
    create = {
        "command_id": str(uuid.uuid4()),
        "caller_identity": env["PRINCIPAL"],
        "name": f"python-{uuid.uuid4()}",
        "spec": {
            "request": {"url": env["WATCH_URL"], "method": "GET", "headers": {}},
            "schedule": {"every_s": 10},
        },
        "expires_at": now + timedelta(minutes=5),
    }
    value = contract.encode("CreateMonitor", create)
    placed = {}

    def delivered(error, message):
        if error is not None:
            raise RuntimeError(f"not delivered: {error}")
        placed[(message.partition(), message.offset())] = "monitor"

    producer = Producer(security(env) | {"enable.idempotence": True})
    headers = sign(env, topics["submit"], value)
    producer.produce(
        topics["submit"], value, key=create["name"].encode(), headers=headers, on_delivery=delivered
    )
    producer.flush(30)
    answer = answers_to(answers, contract, placed)["monitor"]
    monitor_id = str(answer["job_id"])
    kinds = []
    for change in records(changes, contract, "MonitorChange"):
        if str(change["monitor_id"]) == monitor_id:
            kinds.append(change["kind"])
        if len(kinds) >= 2:
            break
    print(
        json.dumps({"case": "monitor", "answer": answer["answer"], "monitor_id": monitor_id, "kinds": kinds})
    )
    answers.close()
    changes.close()


def round_trip(bundle, golden_dir, history_dir):
    """Decode every golden record (older writers from the frozen history); re-encode each whose writer
    is current to the same bytes. Prints the counts."""
    contract = Contract(bundle)
    for path in sorted(os.listdir(history_dir)):
        with open(os.path.join(history_dir, path)) as frozen:
            writer = fastavro.parse_schema(json.load(frozen))
        contract.writers.setdefault(contract._fingerprint(writer), writer)
    decoded = rewritten = 0
    for path in sorted(os.listdir(golden_dir)):
        with open(os.path.join(golden_dir, path)) as lines:
            for line in lines:
                golden = json.loads(line)
                data = bytes.fromhex(golden["hex"])
                record = contract.decode(golden["record"], data)
                decoded += 1
                if data[2:10] == contract._fingerprint(contract.schemas[golden["record"]]):
                    if contract.encode(golden["record"], record) != data:
                        sys.exit(f"{golden['record']} re-encoded differently: {record}")
                    rewritten += 1
    print(json.dumps({"decoded": decoded, "rewritten": rewritten}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["roundtrip"]:
        round_trip(*sys.argv[2:5])
    elif sys.argv[1:2] == ["monitor"]:
        watch(os.environ)
    else:
        main()
