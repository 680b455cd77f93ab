// A Node team's own client of scrapestream's Kafka contract: kafkajs, avsc, node:crypto and the
// contract's bundle (schemas/bundle/scrapestream.v1.avsc); no scrapestream code, no custom codec.
//
// `node client.mjs client` submits (signed), matches each record's answer by partition and offset,
// follows its completion and fetches the artifact from the API, printing what it saw as JSON lines.
// `node client.mjs monitor` creates a monitor of WATCH_URL and reads its first changes.
// `node client.mjs completions N` reads the completions topic from its beginning in one consumer
// until it has N, and prints how many it read. `node client.mjs fingerprints GOLDEN` checks its
// single-object framing against golden records. Settings come from the environment (see `kafka`).
import { createHash, createPrivateKey, randomUUID, sign } from "node:crypto";
import { readFileSync } from "node:fs";
import avro from "avsc";
import { Kafka, logLevel } from "kafkajs";

const env = process.env;
const MARKER = Buffer.from([0xc3, 0x01]);
const LABEL = "scrapestream-command/2\n";
const PATIENCE_MS = 120_000;
// node:crypto takes a raw Ed25519 private key only inside PKCS#8: this DER prefix, then the 32 bytes.
const PKCS8_ED25519 = Buffer.from("302e020100300506032b657004220420", "hex");

// CRC-64-AVRO (the Avro spec's Rabin fingerprint) of a schema's parsing canonical form.
const EMPTY = 0xc15d213aa4d7a795n;
const TABLE = Array.from({ length: 256 }, (_, i) => {
  let fp = BigInt(i);
  for (let j = 0; j < 8; j++) fp = (fp >> 1n) ^ (EMPTY & -(fp & 1n));
  return fp;
});
function fingerprint(canonical) {
  let fp = EMPTY;
  for (const byte of Buffer.from(canonical, "utf8")) fp = (fp >> 8n) ^ TABLE[Number((fp ^ BigInt(byte)) & 0xffn)];
  const out = Buffer.alloc(8);
  out.writeBigUInt64LE(fp);
  return out;
}

class Contract {
  constructor(bundlePath) {
    const registry = {};
    this.types = {};
    this.writers = new Map();
    for (const schema of JSON.parse(readFileSync(bundlePath, "utf8"))) {
      const type = avro.Type.forSchema(schema, { registry, wrapUnions: false });
      const name = type.name.split(".").pop();
      this.types[name] = type;
      this.writers.set(fingerprint(JSON.stringify(type.getSchema())).toString("hex"), type);
    }
  }

  encode(name, record) {
    const type = this.types[name];
    return Buffer.concat([MARKER, fingerprint(JSON.stringify(type.getSchema())), type.toBuffer(record)]);
  }

  decode(name, data) {
    if (!data.subarray(0, 2).equals(MARKER)) throw new Error(`not single-object encoding: ${data.subarray(0, 2).toString("hex")}`);
    const writer = this.writers.get(data.subarray(2, 10).toString("hex"));
    if (!writer) throw new Error(`unknown writer schema ${data.subarray(2, 10).toString("hex")}`);
    const reader = this.types[name];
    return reader.fromBuffer(data.subarray(10), reader.equals(writer) ? undefined : reader.createResolver(writer));
  }
}

function kafka() {
  const config = { clientId: "node-interop", brokers: env.BOOTSTRAP.split(","), logLevel: logLevel.ERROR };
  if (env.SECURITY_PROTOCOL?.endsWith("SSL")) config.ssl = { ca: [readFileSync(env.SSL_CA_FILE, "utf8")] };
  if (env.SECURITY_PROTOCOL?.startsWith("SASL_")) {
    config.sasl = { mechanism: env.SASL_MECHANISM.toLowerCase(), username: env.SASL_USERNAME, password: env.SASL_PASSWORD };
  }
  return new Kafka(config);
}

function signed(topic, value) {
  const key = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, Buffer.from(env.SIGNING_KEY, "base64")]), format: "der", type: "pkcs8" });
  const message = Buffer.concat([Buffer.from(LABEL + [env.DEPLOYMENT, topic, env.PRINCIPAL].join("\n") + "\n"), value]);
  return { "scrapestream-principal": env.PRINCIPAL, "scrapestream-signature": sign(null, message, key).toString("base64") };
}

function submission(url, idempotencyKey) {
  const now = Date.now();
  return {
    command_id: randomUUID(),
    caller_identity: env.PRINCIPAL,
    idempotency_key: idempotencyKey,
    request: { url, method: "GET", headers: {} },
    deadline_at: now + 10 * 60_000,
    expires_at: now + 5 * 60_000,
  };
}

const groupId = () => `${env.GROUP_PREFIX ?? "node-interop."}${randomUUID()}`;

// Every record of `topic` from where `fromBeginning` says, handed to `seen` until it answers true.
async function readUntil(client, topic, fromBeginning, seen) {
  const consumer = client.consumer({ groupId: groupId(), readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning });
  let finish;
  let patience;
  const done = new Promise((resolve, reject) => {
    finish = resolve;
    consumer.on(consumer.events.CRASH, (event) => reject(event.payload.error));
    patience = setTimeout(() => reject(new Error(`gave up reading ${topic}`)), PATIENCE_MS);
  });
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      if (seen(partition, message)) finish();
    },
  });
  try {
    await done;
  } finally {
    clearTimeout(patience); // a pending timer would hold the process open until it fires
    await consumer.disconnect();
  }
}

async function client() {
  const prefix = env.TOPIC_PREFIX ?? "scrapestream";
  const topics = { submit: `${prefix}.submit`, answers: `${prefix}.answers`, completions: `${prefix}.completions` };
  const contract = new Contract(env.BUNDLE);
  const kafkaClient = kafka();
  const key = `node-interop-${randomUUID()}`;
  const first = submission(env.PAGE_URL, key);
  const cases = {
    created: [contract.encode("SubmitJob", first), true],
    repeated: [contract.encode("SubmitJob", first), true],
    reused_key: [contract.encode("SubmitJob", submission(env.OTHER_URL, key)), true],
    undecodable: [Buffer.from("not avro"), true],
    unsigned: [contract.encode("SubmitJob", submission(env.PAGE_URL, null)), false],
  };
  const found = {};
  const placed = new Map();
  const producer = kafkaClient.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  for (const [name, [value, isSigned]] of Object.entries(cases)) {
    const headers = { "scrapestream-correlation-id": `node-${name}`, ...(isSigned ? signed(topics.submit, value) : {}) };
    // A repeat and a reuse of the key share the first's key: one partition decides them in order.
    const recordKey = name === "repeated" || name === "reused_key" ? "created" : name;
    const [meta] = await producer.send({ topic: topics.submit, acks: -1, messages: [{ key: recordKey, value, headers }] });
    placed.set(`${meta.partition}:${meta.baseOffset}`, name);
  }
  await producer.disconnect();
  // from the beginning: an answer may be written before a reader that starts at the end has joined
  await readUntil(kafkaClient, topics.answers, true, (_, message) => {
    const answer = contract.decode("SubmissionAnswer", message.value);
    const name = placed.get(`${answer.source_partition}:${answer.source_offset}`);
    if (name !== undefined && name in found) throw new Error(`a second answer for ${name}`);
    if (name !== undefined) found[name] = answer;
    return Object.keys(found).length === placed.size;
  });
  for (const [name, answer] of Object.entries(found)) {
    const shown = Object.fromEntries(["answer", "correlation_id", "rejection", "reason"].map((k) => [k, answer[k] ?? null]));
    console.log(JSON.stringify({ case: name, ...shown, command_id: answer.command_id, job_id: answer.job_id }));
  }
  const jobId = found.created.job_id;
  let completion;
  await readUntil(kafkaClient, topics.completions, true, (_, message) => {
    const record = contract.decode("JobCompleted", message.value);
    if (record.job_id === jobId) completion = record;
    return completion !== undefined;
  });
  const done = { case: "completion", job_id: jobId, command_id: first.command_id, status: completion.status, artifacts: completion.artifacts.length };
  if (completion.artifacts.length) {
    const artifact = completion.artifacts[0];
    const response = await fetch(`${env.API_URL}/artifacts/${artifact.artifact_id}`, { headers: { Authorization: `Bearer ${env.API_TOKEN}` } });
    const body = Buffer.from(await response.arrayBuffer());
    done.artifact_bytes = body.length;
    done.artifact_sha256_matches = createHash("sha256").update(body).digest("hex") === artifact.sha256;
  }
  console.log(JSON.stringify(done));
}

// Creates a monitor on the submit topic (signed), matches its answer and reads its first two changes.
async function monitor() {
  const prefix = env.TOPIC_PREFIX ?? "scrapestream";
  const topics = { submit: `${prefix}.submit`, answers: `${prefix}.answers`, changes: `${prefix}.changes` };
  const contract = new Contract(env.BUNDLE);
  const kafkaClient = kafka();
  const create = {
    command_id: randomUUID(),
    caller_identity: env.PRINCIPAL,
    name: `node-${randomUUID()}`,
    spec: { request: { url: env.WATCH_URL, method: "GET", headers: {} }, schedule: { every_s: 10 } },
    expires_at: Date.now() + 5 * 60_000,
  };
  const value = contract.encode("CreateMonitor", create);
  const producer = kafkaClient.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const [meta] = await producer.send({ topic: topics.submit, acks: -1, messages: [{ key: create.name, value, headers: signed(topics.submit, value) }] });
  await producer.disconnect();
  let answer;
  await readUntil(kafkaClient, topics.answers, true, (_, message) => {
    const record = contract.decode("SubmissionAnswer", message.value);
    if (record.source_partition === meta.partition && String(record.source_offset) === meta.baseOffset) answer = record;
    return answer !== undefined;
  });
  const kinds = [];
  await readUntil(kafkaClient, topics.changes, true, (_, message) => {
    const change = contract.decode("MonitorChange", message.value);
    if (change.monitor_id === answer.job_id && kinds.length < 2) kinds.push(change.kind);
    return kinds.length >= 2;
  });
  console.log(JSON.stringify({ case: "monitor", answer: answer.answer, monitor_id: answer.job_id, kinds }));
}

async function completions(wanted) {
  const contract = new Contract(env.BUNDLE);
  const topic = `${env.TOPIC_PREFIX ?? "scrapestream"}.completions`;
  const jobs = new Set();
  await readUntil(kafka(), topic, true, (_, message) => {
    jobs.add(contract.decode("JobCompleted", message.value).job_id);
    return jobs.size >= wanted;
  });
  console.log(JSON.stringify({ case: "completions", read: jobs.size }));
}

function fingerprints(goldenPath) {
  const contract = new Contract(env.BUNDLE);
  let checked = 0;
  for (const line of readFileSync(goldenPath, "utf8").split("\n").filter(Boolean)) {
    const golden = JSON.parse(line);
    const data = Buffer.from(golden.hex, "hex");
    if (!data.subarray(2, 10).equals(fingerprint(JSON.stringify(contract.types[golden.record].getSchema())))) continue;
    contract.decode(golden.record, data);
    checked += 1;
  }
  console.log(JSON.stringify({ case: "fingerprints", checked }));
}

const [command, argument] = process.argv.slice(2);
if (command === "client") await client();
else if (command === "monitor") await monitor();
else if (command === "completions") await completions(Number(argument));
else if (command === "fingerprints") fingerprints(argument);
else throw new Error(`unknown command ${command}`);
