package interop;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyFactory;
import java.security.MessageDigest;
import java.security.PrivateKey;
import java.security.Signature;
import java.security.spec.EdECPrivateKeySpec;
import java.security.spec.NamedParameterSpec;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.stream.Stream;
import org.apache.avro.Schema;
import org.apache.avro.SchemaNormalization;
import org.apache.avro.message.BinaryMessageDecoder;
import org.apache.avro.message.BinaryMessageEncoder;
import org.apache.avro.specific.SpecificData;
import org.apache.avro.specific.SpecificRecord;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import scrapestream.v1.CreateMonitor;
import scrapestream.v1.HttpMethod;
import scrapestream.v1.JobCompleted;
import scrapestream.v1.MonitorChange;
import scrapestream.v1.MonitorSchedule;
import scrapestream.v1.MonitorSpec;
import scrapestream.v1.Request;
import scrapestream.v1.SubmissionAnswer;
import scrapestream.v1.SubmitJob;

/** A Java team's client of scrapestream's Kafka contract, with only kafka-clients, Avro and the JDK. */
public final class Interop {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final byte[] LABEL = "scrapestream-command/2\n".getBytes(StandardCharsets.UTF_8);
    private static final Duration PATIENCE = Duration.ofSeconds(120);

    private Interop() {}

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "roundtrip" -> roundTrip(Path.of(args[1]), Path.of(args[2]));
            case "client" -> new Client(System.getenv()).run();
            case "monitor" -> new Client(System.getenv()).watch();
            default -> throw new IllegalArgumentException("roundtrip GOLDEN_DIR HISTORY_DIR | client | monitor");
        }
    }

    /** Decodes every golden record with the generated classes (older writers resolved from the frozen
     * history) and writes each one whose writer is current back to an equal record. */
    static void roundTrip(Path golden, Path history) throws Exception {
        Map<String, List<Schema>> writers = new HashMap<>();
        try (Stream<Path> files = Files.list(history)) {
            for (Path file : files.toList()) {
                Schema schema = new Schema.Parser().parse(file.toFile());
                writers.computeIfAbsent(schema.getName(), name -> new ArrayList<>()).add(schema);
            }
        }
        int decoded = 0;
        int rewritten = 0;
        try (Stream<Path> files = Files.list(golden)) {
            for (Path file : files.sorted().toList()) {
                for (String line : Files.readAllLines(file)) {
                    JsonNode golden1 = JSON.readTree(line);
                    String name = golden1.get("record").asText();
                    byte[] bytes = HexFormat.of().parseHex(golden1.get("hex").asText());
                    Class<?> type = Class.forName("scrapestream.v1." + name);
                    Schema current = (Schema) type.getMethod("getClassSchema").invoke(null);
                    SpecificData model = SpecificData.getForClass(type);
                    BinaryMessageDecoder<SpecificRecord> decoder = new BinaryMessageDecoder<>(model, current);
                    for (Schema writer : writers.getOrDefault(name, List.of())) {
                        decoder.addSchema(writer);
                    }
                    SpecificRecord record = decoder.decode(bytes);
                    decoded++;
                    long fingerprint = SchemaNormalization.parsingFingerprint64(current);
                    long written = ByteBuffer.wrap(bytes, 2, 8).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong();
                    if (fingerprint == written) {
                        byte[] again = toBytes(new BinaryMessageEncoder<SpecificRecord>(model, current).encode(record));
                        // Map entries may come back in another order: equal records, equally long.
                        if (again.length != bytes.length || !record.toString().equals(decoder.decode(again).toString())) {
                            throw new IllegalStateException(name + " re-encoded differently: " + record);
                        }
                        rewritten++;
                    }
                }
            }
        }
        System.out.println("{\"decoded\": " + decoded + ", \"rewritten\": " + rewritten + "}");
    }

    static byte[] toBytes(ByteBuffer buffer) {
        byte[] bytes = new byte[buffer.remaining()];
        buffer.get(bytes);
        return bytes;
    }

    /** Submits, matches each answer, follows its completion and fetches its artifact; prints what it saw. */
    static final class Client {
        private final Map<String, String> env;
        private final String submitTopic;
        private final String answersTopic;
        private final String completionsTopic;

        Client(Map<String, String> env) {
            this.env = env;
            String prefix = env.getOrDefault("TOPIC_PREFIX", "scrapestream");
            this.submitTopic = prefix + ".submit";
            this.answersTopic = prefix + ".answers";
            this.completionsTopic = prefix + ".completions";
        }

        void run() throws Exception {
            Properties common = security();
            common.put("bootstrap.servers", env.get("BOOTSTRAP"));
            Properties producerProps = new Properties();
            producerProps.putAll(common);
            producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
            producerProps.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
            Properties consumerProps = new Properties();
            consumerProps.putAll(common);
            consumerProps.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            try (KafkaProducer<byte[], byte[]> producer =
                            new KafkaProducer<>(producerProps, new ByteArraySerializer(), new ByteArraySerializer());
                    KafkaConsumer<byte[], byte[]> answers =
                            new KafkaConsumer<>(consumerProps, new ByteArrayDeserializer(), new ByteArrayDeserializer());
                    KafkaConsumer<byte[], byte[]> completions =
                            new KafkaConsumer<>(consumerProps, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                fromEnd(answers, answersTopic);
                fromEnd(completions, completionsTopic);
                String key = "interop-" + UUID.randomUUID();
                SubmitJob first = submission(env.get("PAGE_URL"), key);
                SubmitJob otherUrl = submission(env.get("OTHER_URL"), key);
                Map<String, RecordMetadata> sent = new HashMap<>();
                sent.put("created", send(producer, "created", encode(first), true));
                sent.put("repeated", send(producer, "repeated", encode(first), true));
                sent.put("reused_key", send(producer, "reused_key", encode(otherUrl), true));
                sent.put("undecodable", send(producer, "undecodable", "not avro".getBytes(StandardCharsets.UTF_8), true));
                sent.put("unsigned", send(producer, "unsigned", encode(submission(env.get("PAGE_URL"), null)), false));
                Map<String, SubmissionAnswer> answered = awaitAnswers(answers, sent);
                for (Map.Entry<String, SubmissionAnswer> entry : answered.entrySet()) {
                    SubmissionAnswer answer = entry.getValue();
                    ObjectNode seen = JSON.createObjectNode();
                    seen.put("case", entry.getKey());
                    seen.put("answer", answer.getAnswer().toString());
                    seen.put("correlation_id", answer.getCorrelationId());
                    seen.put("command_id", String.valueOf(answer.getCommandId()));
                    seen.put("job_id", String.valueOf(answer.getJobId()));
                    seen.put("rejection", String.valueOf(answer.getRejection()));
                    seen.put("reason", answer.getReason());
                    System.out.println(seen);
                }
                UUID jobId = answered.get("created").getJobId();
                JobCompleted completion = awaitCompletion(completions, jobId);
                ObjectNode done = JSON.createObjectNode();
                done.put("case", "completion");
                done.put("job_id", jobId.toString());
                done.put("command_id", first.getCommandId().toString());
                done.put("status", completion.getStatus().toString());
                done.put("artifacts", completion.getArtifacts().size());
                if (!completion.getArtifacts().isEmpty()) {
                    var artifact = completion.getArtifacts().get(0);
                    byte[] body = fetch(artifact.getArtifactId());
                    String sha256 = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(body));
                    done.put("artifact_bytes", body.length);
                    done.put("artifact_sha256_matches", sha256.equals(artifact.getSha256()));
                }
                System.out.println(done);
            }
        }

        /** Creates a monitor on the submit topic, matches its answer and reads its first two changes. */
        void watch() throws Exception {
            Properties common = security();
            common.put("bootstrap.servers", env.get("BOOTSTRAP"));
            Properties producerProps = new Properties();
            producerProps.putAll(common);
            producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
            Properties consumerProps = new Properties();
            consumerProps.putAll(common);
            consumerProps.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            String changesTopic = submitTopic.substring(0, submitTopic.length() - "submit".length()) + "changes";
            try (KafkaProducer<byte[], byte[]> producer =
                            new KafkaProducer<>(producerProps, new ByteArraySerializer(), new ByteArraySerializer());
                    KafkaConsumer<byte[], byte[]> answers =
                            new KafkaConsumer<>(consumerProps, new ByteArrayDeserializer(), new ByteArrayDeserializer());
                    KafkaConsumer<byte[], byte[]> changes =
                            new KafkaConsumer<>(consumerProps, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                fromEnd(answers, answersTopic);
                fromEnd(changes, changesTopic);
                Request page = Request.newBuilder().setUrl(env.get("WATCH_URL")).setMethod(HttpMethod.GET).build();
                MonitorSpec spec = MonitorSpec.newBuilder()
                        .setRequest(page)
                        .setSchedule(MonitorSchedule.newBuilder().setEveryS(10).build())
                        .build();
                CreateMonitor create = CreateMonitor.newBuilder()
                        .setCommandId(UUID.randomUUID())
                        .setCallerIdentity(env.get("PRINCIPAL"))
                        .setName("java-" + UUID.randomUUID())
                        .setSpec(spec)
                        .setExpiresAt(Instant.now().plus(Duration.ofMinutes(5)))
                        .build();
                Map<String, RecordMetadata> sent = new HashMap<>();
                sent.put("monitor", send(producer, "monitor", toBytes(create.toByteBuffer()), true));
                SubmissionAnswer answer = awaitAnswers(answers, sent).get("monitor");
                UUID monitorId = answer.getJobId();
                List<String> kinds = new ArrayList<>();
                Instant giveUp = Instant.now().plus(PATIENCE);
                while (kinds.size() < 2 && Instant.now().isBefore(giveUp)) {
                    for (ConsumerRecord<byte[], byte[]> record : changes.poll(Duration.ofMillis(200))) {
                        MonitorChange change = MonitorChange.fromByteBuffer(ByteBuffer.wrap(record.value()));
                        if (change.getMonitorId().equals(monitorId) && kinds.size() < 2) {
                            kinds.add(change.getKind().toString());
                        }
                    }
                }
                ObjectNode seen = JSON.createObjectNode();
                seen.put("case", "monitor");
                seen.put("answer", answer.getAnswer().toString());
                seen.put("monitor_id", monitorId.toString());
                kinds.forEach(seen.putArray("kinds")::add);
                System.out.println(seen);
            }
        }

        SubmitJob submission(String url, String idempotencyKey) {
            Request request = Request.newBuilder().setUrl(url).setMethod(HttpMethod.GET).build();
            return SubmitJob.newBuilder()
                    .setCommandId(UUID.randomUUID())
                    .setCallerIdentity(env.get("PRINCIPAL"))
                    .setIdempotencyKey(idempotencyKey)
                    .setRequest(request)
                    .setDeadlineAt(Instant.now().plus(Duration.ofMinutes(10)))
                    .setExpiresAt(Instant.now().plus(Duration.ofMinutes(5)))
                    .build();
        }

        static byte[] encode(SubmitJob job) throws IOException {
            return toBytes(job.toByteBuffer());
        }

        RecordMetadata send(KafkaProducer<byte[], byte[]> producer, String name, byte[] value, boolean signed)
                throws Exception {
            // A repeat and a reuse of the key share the first's key: one partition decides them in order.
            String key = name.equals("repeated") || name.equals("reused_key") ? "created" : name;
            ProducerRecord<byte[], byte[]> record =
                    new ProducerRecord<>(submitTopic, key.getBytes(StandardCharsets.UTF_8), value);
            record.headers().add("scrapestream-correlation-id", ("java-" + name).getBytes(StandardCharsets.UTF_8));
            if (signed) {
                String principal = env.get("PRINCIPAL");
                record.headers().add("scrapestream-principal", principal.getBytes(StandardCharsets.UTF_8));
                record.headers().add("scrapestream-signature", sign(principal, value));
            }
            return producer.send(record).get();
        }

        /** Ed25519 over the label, the deployment, the topic, the principal and the value, from the JDK alone. */
        byte[] sign(String principal, byte[] value) throws Exception {
            byte[] raw = Base64.getDecoder().decode(env.get("SIGNING_KEY"));
            byte[] littleEndian = raw.clone();
            PrivateKey key = KeyFactory.getInstance("Ed25519")
                    .generatePrivate(new EdECPrivateKeySpec(NamedParameterSpec.ED25519, littleEndian));
            Signature signer = Signature.getInstance("Ed25519");
            signer.initSign(key);
            signer.update(LABEL);
            String bound = env.get("DEPLOYMENT") + "\n" + submitTopic + "\n" + principal + "\n";
            signer.update(bound.getBytes(StandardCharsets.UTF_8));
            signer.update(value);
            return Base64.getEncoder().encode(signer.sign());
        }

        /** The cluster's login, as its operators gave it: SASL (SCRAM or PLAIN) over TLS, or none. */
        Properties security() {
            Properties properties = new Properties();
            String protocol = env.getOrDefault("SECURITY_PROTOCOL", "PLAINTEXT");
            properties.put("security.protocol", protocol);
            if (protocol.startsWith("SASL_")) {
                String mechanism = env.get("SASL_MECHANISM");
                String module = mechanism.startsWith("SCRAM")
                        ? "org.apache.kafka.common.security.scram.ScramLoginModule"
                        : "org.apache.kafka.common.security.plain.PlainLoginModule";
                properties.put("sasl.mechanism", mechanism);
                properties.put(
                        "sasl.jaas.config",
                        module + " required username=\"" + env.get("SASL_USERNAME") + "\" password=\""
                                + env.get("SASL_PASSWORD") + "\";");
            }
            if (protocol.endsWith("SSL") && env.containsKey("SSL_CA_FILE")) {
                properties.put("ssl.truststore.type", "PEM");
                properties.put("ssl.truststore.location", env.get("SSL_CA_FILE"));
            }
            return properties;
        }

        static void fromEnd(KafkaConsumer<byte[], byte[]> consumer, String topic) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic)) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToEnd(partitions);
            partitions.forEach(consumer::position);
        }

        Map<String, SubmissionAnswer> awaitAnswers(
                KafkaConsumer<byte[], byte[]> consumer, Map<String, RecordMetadata> sent) throws IOException {
            Map<String, SubmissionAnswer> found = new HashMap<>();
            Instant giveUp = Instant.now().plus(PATIENCE);
            while (found.size() < sent.size() && Instant.now().isBefore(giveUp)) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    SubmissionAnswer answer = SubmissionAnswer.fromByteBuffer(ByteBuffer.wrap(record.value()));
                    for (Map.Entry<String, RecordMetadata> entry : sent.entrySet()) {
                        RecordMetadata where = entry.getValue();
                        if (where.partition() == answer.getSourcePartition()
                                && where.offset() == answer.getSourceOffset()) {
                            if (found.put(entry.getKey(), answer) != null) {
                                throw new IllegalStateException("a second answer for " + entry.getKey());
                            }
                        }
                    }
                }
            }
            if (found.size() < sent.size()) {
                throw new IllegalStateException("answers for " + found.keySet() + " only, of " + sent.keySet());
            }
            return found;
        }

        JobCompleted awaitCompletion(KafkaConsumer<byte[], byte[]> consumer, UUID jobId) throws IOException {
            Instant giveUp = Instant.now().plus(PATIENCE);
            while (Instant.now().isBefore(giveUp)) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    JobCompleted completion = JobCompleted.fromByteBuffer(ByteBuffer.wrap(record.value()));
                    if (completion.getJobId().equals(jobId)) {
                        return completion;
                    }
                }
            }
            throw new IllegalStateException("no completion of " + jobId);
        }

        byte[] fetch(UUID artifactId) throws Exception {
            HttpRequest request = HttpRequest.newBuilder(URI.create(env.get("API_URL") + "/artifacts/" + artifactId))
                    .header("Authorization", "Bearer " + env.get("API_TOKEN"))
                    .build();
            HttpResponse<byte[]> response =
                    HttpClient.newHttpClient().send(request, HttpResponse.BodyHandlers.ofByteArray());
            if (response.statusCode() != 200) {
                throw new IllegalStateException("GET /artifacts/" + artifactId + ": " + response.statusCode());
            }
            return response.body();
        }
    }
}
