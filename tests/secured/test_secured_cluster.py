"""On a cluster as production runs it (`secured_kafka`: SASL_SSL with SCRAM-SHA-512, a mutual TLS
listener, ACLs enforced, only `admin` a super user), each actor logs in as its own principal with
only the ACLs `scrapestream acls --apply` gives it: jobs run end to end; a producer is refused every
internal topic at the broker; a wrong password, an untrusted CA or a missing ACL ends a command at
once with exit 2 naming the setting to change.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from uuid import uuid4

import httpx
import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError, TopicAuthorizationFailedError

from bench.certificates import CertificateAuthority
from bench.kafka import KafkaCluster
from schemas.commands import SubmitJob
from schemas.enums import AnswerKind, JobStatus
from schemas.events import JobCompleted
from schemas.records import Request
from streams.broker.access import KafkaAccess, KafkaAccessError
from streams.broker.clients import kafka_consumer, kafka_producer
from streams.broker.compat import KAFKA, start_whole
from streams.broker.refusals import admitted
from streams.client import Client
from streams.clock import utc_now
from streams.settings import load_settings
from tests.commands import run
from tests.e2e.conftest import System, running_system
from tests.secured.harness import Deployment, made

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.xdist_group("kafka"),  # one process starts the secured node
    pytest.mark.timeout(300),
]
DEADLINE = timedelta(minutes=5)
INTERNAL = ("commands", "events", "due", "controls", "outbox", "snapshots", "routes", "cache", "references")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def deployment(secured_kafka: KafkaCluster) -> Deployment:
    deployment = await made(secured_kafka, f"s{uuid4().hex[:8]}")
    await deployment.grant("worker", "worker")
    await deployment.grant("producer", "producer")
    await deployment.grant("consumer", "consumer")
    return deployment


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def system(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[System]:
    """A worker logged in as `worker`, with the `worker` ACLs alone."""
    data_dir = tmp_path_factory.mktemp("secured-worker")
    settings = load_settings(
        **deployment.settings("worker"),
        data_dir=data_dir,
        web_port=0,
        auth_enabled=False,
        allow_private_networks=True,
        profiles={"http.fetch": (8_000, 3)},
    )
    async with running_system(settings) as running:
        yield running


async def test_acls_prints_exactly_what_each_role_needs_and_apply_creates_it(deployment: Deployment):
    code, said = await run(
        "acls",
        "--role",
        "producer",
        "--principal",
        "User:producer",
        cwd=Path.cwd(),
        **deployment.as_user("producer"),
    )
    assert code == 0, said
    assert said.splitlines() == [
        "ALLOW User:producer IDEMPOTENT_WRITE CLUSTER LITERAL kafka-cluster",
        "ALLOW User:producer READ GROUP PREFIXED producer.",
        f"ALLOW User:producer DESCRIBE TOPIC LITERAL {deployment.prefix}.answers",
        f"ALLOW User:producer READ TOPIC LITERAL {deployment.prefix}.answers",
        f"ALLOW User:producer DESCRIBE TOPIC LITERAL {deployment.prefix}.completions",
        f"ALLOW User:producer READ TOPIC LITERAL {deployment.prefix}.completions",
        f"ALLOW User:producer DESCRIBE TOPIC LITERAL {deployment.prefix}.submit",
        f"ALLOW User:producer WRITE TOPIC LITERAL {deployment.prefix}.submit",
    ]


async def test_topics_check_names_each_acl_the_workers_principal_lacks(deployment: Deployment):
    code, said = await run("topics", "check", cwd=Path.cwd(), **deployment.as_user("stranger"))
    assert code == 1, said
    assert f"missing ACL: ALLOW User:stranger READ TOPIC PREFIXED {deployment.prefix}." in said
    assert f"missing ACL: ALLOW User:stranger WRITE TOPIC PREFIXED {deployment.prefix}." in said
    assert f"missing ACL: ALLOW User:stranger READ GROUP LITERAL {deployment.prefix}" in said
    code, said = await run("topics", "check", cwd=Path.cwd(), **deployment.as_user("worker"))
    assert code == 0, said
    assert "missing ACL" not in said


async def test_a_job_runs_end_to_end_with_each_actor_its_own_principal(
    system: System, deployment: Deployment, origin
):
    url = origin.url("/page/secured")
    code, said = await run(
        "submit", url, "--wait", "--json", cwd=Path.cwd(), **deployment.as_user("producer")
    )
    assert code == 0, said
    async with Client(deployment.access("consumer"), KAFKA, deployment.prefix) as reader:
        async for completion in reader.completions():
            if completion.url == url:
                break
    assert completion.status is JobStatus.SUCCEEDED
    (artifact,) = completion.artifacts
    assert system.worker is not None
    async with httpx.AsyncClient() as http:
        stored = await http.get(f"http://127.0.0.1:{system.worker.web_port}/artifacts/{artifact.artifact_id}")
    assert stored.status_code == 200
    assert hashlib.sha256(stored.content).hexdigest() == artifact.sha256
    password = deployment.secured.users["worker"]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{system.worker.web_port}") as http:
        for path in ("/metrics", "/healthz", "/readyz", "/ui/", "/ui/overview/live", "/routes"):
            assert password not in (await http.get(path)).text, path


async def test_the_python_client_submits_and_reads_its_answer_as_a_producer(
    system: System, deployment: Deployment, origin
):
    async with Client(deployment.access("producer"), KAFKA, deployment.prefix) as client:
        job_id, answer = await client.submit_answered(submission(origin.url("/page/secured-client")), 60)
        assert answer is not None
        assert answer.answer is AnswerKind.CREATED
        completion = await client.wait_for(job_id)
    assert isinstance(completion, JobCompleted)
    assert completion.status is JobStatus.SUCCEEDED


def submission(url: str) -> SubmitJob:
    return SubmitJob(caller_identity="secured", request=Request(url=url), deadline_at=utc_now() + DEADLINE)


@pytest.mark.parametrize("topic", INTERNAL)
async def test_a_producer_is_refused_writing_or_reading_an_internal_topic(deployment: Deployment, topic: str):
    name = f"{deployment.prefix}.{topic}"
    producer = kafka_producer(deployment.access("producer"), enable_idempotence=False)
    await start_whole(producer.start, producer.stop)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            await producer.send_and_wait(name, b"forged", key=b"k")
    finally:
        await producer.stop()
    with pytest.raises(TopicAuthorizationFailedError):
        await read_some(kafka_consumer(deployment.access("producer"), name, auto_offset_reset="earliest"))


async def read_some(consumer: AIOKafkaConsumer) -> None:
    try:
        await start_whole(consumer.start, consumer.stop)
        await consumer.getmany(timeout_ms=5_000)
    finally:
        await consumer.stop()


async def test_a_consumer_is_refused_writing_the_submit_topic(deployment: Deployment):
    producer = kafka_producer(deployment.access("consumer"), enable_idempotence=False)
    await start_whole(producer.start, producer.stop)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            await producer.send_and_wait(f"{deployment.prefix}.submit", b"not mine to send", key=b"k")
    finally:
        await producer.stop()


async def test_a_wrong_password_is_refused_naming_the_login_settings(deployment: Deployment):
    with pytest.raises(
        KafkaAccessError, match="SCRAPESTREAM_KAFKA_SASL_USERNAME / SCRAPESTREAM_KAFKA_SASL_PASSWORD"
    ):
        await admitted(deployment.access("producer", password="not-its-password"))
    producer = kafka_producer(deployment.access("producer", password="not-its-password"))
    with pytest.raises(KafkaError):
        await start_whole(producer.start, producer.stop)
    await producer.stop()


def _other_ca(tmp_path: Path) -> Path:
    return CertificateAuthority(tmp_path / "other-ca", "another CA").ca_file


@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("wrong password", "SCRAPESTREAM_KAFKA_SASL_PASSWORD"),
        ("untrusted CA", "SCRAPESTREAM_KAFKA_SSL_CA_FILE"),
        ("plaintext to a TLS listener", "SCRAPESTREAM_KAFKA_SECURITY_PROTOCOL"),
        ("missing ACLs", "scrapestream acls --role worker --principal User:stranger --apply"),
    ],
)
async def test_a_misconfigured_worker_ends_at_once_with_exit_2_naming_the_setting(
    deployment: Deployment, tmp_path: Path, case: str, named: str
):
    user = "stranger" if case == "missing ACLs" else "worker"
    settings = deployment.as_user(user, data_dir=tmp_path / "data", web_port=0, auth_enabled="false")
    if case == "wrong password":
        settings["kafka_sasl_password"] = "not-its-password"
    elif case == "untrusted CA":
        settings["kafka_ssl_ca_file"] = str(_other_ca(tmp_path))
    elif case == "plaintext to a TLS listener":
        settings = {k: v for k, v in settings.items() if not k.startswith(("kafka_sasl", "kafka_ssl"))}
        settings["kafka_security_protocol"] = "PLAINTEXT"
    code, said = await run("worker", cwd=tmp_path, **settings)
    assert code == 2, said
    refusal = [line for line in said.splitlines() if line.startswith("scrapestream: ")]
    assert len(refusal) == 1, said
    assert named in refusal[0]
    assert deployment.secured.users[user] not in said  # the password is never printed


async def test_the_cli_ends_with_exit_2_for_a_wrong_password(deployment: Deployment, tmp_path: Path):
    settings = deployment.as_user("producer") | {"kafka_sasl_password": "not-its-password"}
    code, said = await run("submit", "http://127.0.0.1:9/", cwd=tmp_path, **settings)
    assert code == 2, said
    assert "SCRAPESTREAM_KAFKA_SASL_PASSWORD" in said


async def test_a_client_certificate_logs_in_as_its_subject_and_submits(
    system: System, deployment: Deployment, tmp_path: Path, origin
):
    issued = deployment.secured.ca.issue("mtls-producer")
    await deployment.grant("producer", "mtls-producer")
    access = KafkaAccess(
        deployment.cluster.mtls_bootstrap,
        "SSL",
        ssl_ca_file=deployment.secured.ca.ca_file,
        ssl_cert_file=issued.certificate,
        ssl_key_file=issued.key,
    )
    async with Client(access, KAFKA, deployment.prefix) as client:
        _, answer = await client.submit_answered(submission(origin.url("/page/mtls")), 60)
    assert answer is not None
    assert answer.answer is AnswerKind.CREATED
    stranger = CertificateAuthority(tmp_path / "other-ca", "another CA").issue("mtls-producer")
    refused = replace(access, ssl_cert_file=stranger.certificate, ssl_key_file=stranger.key)
    with pytest.raises(KafkaAccessError, match="SCRAPESTREAM_KAFKA_SSL_CERT_FILE"):
        await admitted(refused)
