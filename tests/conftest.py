"""Session fixtures: the embedded broker and an S3 server on free loopback ports, always stopped."""

from __future__ import annotations

import asyncio
import gc
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from bench.kafka import KAFKA_VERSION, KafkaCluster, fetch_kafka
from bench.secured import Secured
from bench.zipkin import VERSION as ZIPKIN_VERSION
from bench.zipkin import running_zipkin
from streams.broker.embedded import EmbeddedBroker, free_loopback_port
from tests.brokers import POM, TestBroker, kafka_or_skip, register
from tests.registry import VERSION as REGISTRY_VERSION
from tests.registry import running_registry

pytest_plugins = ["tests.phases"]

# A suite started in the background inherits an ignored SIGINT, and so would every CLI the tests Ctrl-C.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--broker",
        choices=["tansu", "kafka", "both"],
        default="both",
        help="which broker the broker tests run on: the embedded tansu, Apache Kafka, or each in turn",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "broker" in metafunc.fixturenames:
        chosen = metafunc.config.getoption("--broker")
        kinds = ["tansu", "kafka"] if chosen == "both" else [chosen]
        if metafunc.definition.get_closest_marker("one_broker"):
            kinds = kinds[:1]
        if metafunc.definition.get_closest_marker("kafka_only"):
            kinds = [kind for kind in kinds if kind == "kafka"]
        soak_on = metafunc.definition.get_closest_marker("soak_on")
        soaks = set(soak_on.args) if soak_on else set()
        # Under xdist (`-n 2 --dist loadgroup`) every test of one broker runs in one process, so each
        # process starts only its own broker, once.
        params = [pytest.param(kind, marks=marks_of(kind, soaks)) for kind in kinds]
        metafunc.parametrize("broker", params, indirect=True, scope="session")


def marks_of(kind: str, soaks: set[str]) -> list[pytest.MarkDecorator]:
    return [pytest.mark.xdist_group(kind), *([pytest.mark.soak] if kind in soaks else [])]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The cheapest gates first: static checks, then everything else in file order."""
    items.sort(key=lambda item: 0 if item.get_closest_marker("static") else 1)


STARTED: list[str] = []  # the brokers this process started, for the summary


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Before the summary imports more modules: a fenced aiokafka producer leaves futures whose
    # finalizer logs a traceback, and CPython 3.11 fails an `ast.parse` that one interrupts.
    gc.collect()
    if hasattr(session.config, "workeroutput"):  # an xdist worker: its controller prints them
        session.config.workeroutput["brokers"] = list(STARTED)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: without xdist it is never called
def pytest_testnodedown(node: Any, error: object) -> None:
    STARTED.extend(getattr(node, "workeroutput", {}).get("brokers", []))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in STARTED:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestBroker]:
    """One broker for the whole session: tansu, or a one-node Apache Kafka (fetched once by Maven)."""
    if request.param == "kafka":
        kafka_or_skip()
        jars = fetch_kafka(POM)
        cluster = KafkaCluster(jars, tmp_path_factory.mktemp("kafka"), nodes=1)
        asyncio.run(cluster.start())
        STARTED.append(f"brokers: Apache Kafka {KAFKA_VERSION}, one node at {cluster.bootstrap}")
        try:
            yield register(TestBroker("kafka", cluster.bootstrap))
        finally:
            cluster.stop()
        return
    log_path = tmp_path_factory.mktemp("broker") / "tansu.log"
    embedded = EmbeddedBroker(log_path=log_path)
    asyncio.run(embedded.start())
    STARTED.append(f"brokers: tansu (embedded) at {embedded.bootstrap}")
    try:
        yield register(TestBroker("tansu", embedded.bootstrap))
    finally:
        embedded.stop()


@pytest.fixture(scope="session")
def kafka_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    """Three Apache Kafka brokers (separate JVMs, so one can be killed), for the Kafka-only tests."""
    if request.config.getoption("--broker") == "tansu":
        pytest.skip("Apache Kafka only: run with --broker kafka or both")
    kafka_or_skip()
    cluster = KafkaCluster(fetch_kafka(POM), tmp_path_factory.mktemp("cluster"), nodes=3)
    asyncio.run(cluster.start())
    STARTED.append(f"brokers: Apache Kafka {KAFKA_VERSION}, three brokers at {cluster.bootstrap}")
    register(TestBroker("kafka", cluster.bootstrap))
    try:
        yield cluster
    finally:
        cluster.stop()


# Each its own SCRAM principal on the secured node.
SECURED_USERS = ("worker", "producer", "consumer", "team", "executor", "stranger")


@pytest.fixture(scope="session")
def secured_kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    """One Apache Kafka node as production clusters run: SASL_SSL (SCRAM-SHA-512) and mutual TLS
    listeners, a CA made for the session, ACLs enforced, only `admin` a super user (`bench/secured.py`)."""
    if request.config.getoption("--broker") == "tansu":
        pytest.skip("Apache Kafka only: run with --broker kafka or both")
    kafka_or_skip()
    directory = tmp_path_factory.mktemp("secured")
    secured = Secured.made_in(directory, *SECURED_USERS)
    cluster = KafkaCluster(fetch_kafka(POM), directory / "kafka", nodes=1, secured=secured)
    asyncio.run(cluster.start())
    STARTED.append(f"brokers: Apache Kafka {KAFKA_VERSION}, one secured node at {cluster.bootstrap}")
    register(TestBroker("kafka", cluster.bootstrap))
    try:
        yield cluster
    finally:
        cluster.stop()


@dataclass(frozen=True)
class S3Server:
    """A real S3-compatible server (moto) on loopback; credentials are its fixed test ones."""

    endpoint_url: str

    def settings(self, bucket: str) -> dict[str, object]:
        return {
            "artifact_store": "s3",
            "s3_bucket": bucket,
            "s3_endpoint_url": self.endpoint_url,
            "s3_access_key_id": "testing",
            "s3_secret_access_key": "testing",
            "s3_create_bucket": True,
        }

    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    port = free_loopback_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.stop()


@pytest.fixture(scope="session")
def zipkin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real trace backend (Zipkin's server, fetched once by Maven): its base URL."""
    kafka_or_skip()  # the same Java and Maven
    with running_zipkin(tmp_path_factory.mktemp("zipkin") / "zipkin.log") as url:
        STARTED.append(f"trace backend: Zipkin {ZIPKIN_VERSION} at {url}")
        yield url


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real schema registry speaking Confluent's REST API (Apicurio, fetched once by Maven): its URL."""
    kafka_or_skip()  # the same Java and Maven
    with running_registry(tmp_path_factory.mktemp("registry") / "registry.log") as url:
        STARTED.append(f"schema registry: Apicurio {REGISTRY_VERSION} at {url}")
        yield url
