"""Runs Apache Kafka itself on loopback: one combined KRaft node, or a cluster of several (for tests
and benchmarks; users run their own cluster).

The broker's jars come from Maven Central through the pinned descriptor `tests/kafka/pom.xml`
(`fetch_kafka` runs `mvn dependency:copy-dependencies` into a cache outside the work tree, once).
Each node is a separate JVM (broker and controller in one process; every node a voter of a static
quorum), on free loopback ports, its storage formatted first, with a heap and collector sized for a
small machine. `start` returns once every node serves metadata; `stop` ends every JVM it started,
also at interpreter exit, and the JVMs die with this process.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import signal
import subprocess
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType

from aiokafka.errors import KafkaError

from bench.jvm import CACHE, fetched, killed_with_parent
from bench.secured import Secured
from streams.broker.access import KafkaAccess, plaintext
from streams.broker.clients import kafka_admin, kafka_client
from streams.broker.embedded import free_loopback_port
from streams.errors import BrokerError

KAFKA_VERSION = "4.4.0"
LOGGING_BINDING = "log4j-slf4j-impl-2.25.5.jar"  # tests/kafka/pom.xml's
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0
JVM_OPTIONS = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",  # two cores: no parallel collector threads competing with the brokers
    "-XX:TieredStopAtLevel=1",  # start in seconds; tests and benchmarks do not run long enough for C2
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
LOG4J = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders><File name="file" fileName="{path}"><PatternLayout pattern="%d %p %c: %m%n"/></File></Appenders>
  <Loggers>
    <!-- Why each rebalance began and how it ended: what a rejoin storm on a recovering cluster needs. -->
    <Logger name="org.apache.kafka.coordinator.group" level="info"/>
    <Root level="warn"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


async def _listening(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def kafka_jars(version: str = KAFKA_VERSION) -> Path:
    return CACHE / f"kafka-{version}"


def fetch_kafka(pom: Path, version: str = KAFKA_VERSION) -> Path:
    """The directory of the broker's jars, fetched with Maven from the pinned descriptor if missing."""
    try:
        # The marker is the last jar the descriptor gained: a cache fetched before it is fetched again.
        return fetched(kafka_jars(version).name, pom, "dependency:copy-dependencies", LOGGING_BINDING)
    except RuntimeError as exc:
        raise BrokerError(f"Apache Kafka {version}: {exc}") from exc


@dataclass
class Node:
    node_id: int
    port: int
    controller_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    mtls_port: int = 0  # a secured node's listener for client certificates

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass
class KafkaCluster:
    """`nodes` combined KRaft nodes on loopback; `overrides` are broker settings for every node."""

    jars: Path
    directory: Path
    nodes: int = 1
    overrides: dict[str, str] = field(default_factory=dict)
    java: str = "java"
    secured: Secured | None = None  # SASL_SSL + mutual TLS + ACLs (`bench/secured.py`); else PLAINTEXT
    members: list[Node] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return ",".join(node.address for node in self.members)

    @property
    def access(self) -> KafkaAccess:
        """A super user's access: the admin login on a secured cluster."""
        return plaintext(self.bootstrap) if self.secured is None else self.secured.access(self.bootstrap)

    @property
    def mtls_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{node.mtls_port}" for node in self.members)

    @property
    def cluster_id(self) -> str:
        return "c" + uuid.uuid5(uuid.NAMESPACE_URL, str(self.directory)).hex[:21]

    async def __aenter__(self) -> KafkaCluster:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    async def start(self) -> None:
        self.members = [
            Node(
                n,
                free_loopback_port(),
                free_loopback_port(),
                self.directory / f"node-{n}",
                None,
                free_loopback_port(),
            )
            for n in range(1, self.nodes + 1)
        ]
        atexit.register(self.stop)
        try:
            for node in self.members:
                self._format(node)
            for node in self.members:
                self._launch(node)
            await self.ready()
        except BaseException:
            self.stop()
            raise

    def _properties(self, node: Node) -> dict[str, str]:
        voters = ",".join(f"{m.node_id}@127.0.0.1:{m.controller_port}" for m in self.members)
        replicas = str(min(3, self.nodes))
        return {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(node.directory / "data"),
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": str(min(2, self.nodes)),
            "transaction.state.log.num.partitions": "4",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.cleaner.threads": "1",
            "log.cleaner.backoff.ms": "500",
            "log.retention.check.interval.ms": "1000",
            "log.initial.task.delay.ms": "0",
            "log.segment.delete.delay.ms": "0",
            "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
            "socket.send.buffer.bytes": "-1",
            "socket.receive.buffer.bytes": "-1",
            **(
                {}
                if self.secured is None
                else self.secured.properties(node.port, node.mtls_port, node.controller_port)
            ),
            **self.overrides,
        }

    def _security(self, node: Node) -> dict[str, str]:
        if self.secured is None:
            return {}
        node.mtls_port = node.mtls_port or free_loopback_port()
        return self.secured.properties(node.port, node.mtls_port, node.controller_port)

    def _format(self, node: Node) -> None:
        node.directory.mkdir(parents=True, exist_ok=True)
        properties = node.directory / "server.properties"
        properties.write_text("".join(f"{key}={value}\n" for key, value in self._properties(node).items()))
        (node.directory / "log4j2.xml").write_text(LOG4J.format(path=node.directory / "broker.log"))
        command = [
            *self._java(node),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self.cluster_id,
            "-c",
            str(properties),
            *([] if self.secured is None else self.secured.format_arguments()),
        ]
        finished = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
        if finished.returncode != 0:
            raise BrokerError(
                f"formatting Kafka node {node.node_id} failed: {finished.stdout}{finished.stderr}"
            )

    def _java(self, node: Node) -> list[str]:
        return [
            self.java,
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={node.directory / 'log4j2.xml'}",
            "-cp",
            f"{self.jars}/*",
        ]

    def _launch(self, node: Node) -> None:
        output = (node.directory / "stdout.log").open("ab")
        node.process = subprocess.Popen(  # noqa: S603
            [*self._java(node), "kafka.Kafka", str(node.directory / "server.properties")],
            stdout=output,
            stderr=subprocess.STDOUT,
            preexec_fn=killed_with_parent,
        )
        output.close()

    async def ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Returns once every running node serves metadata listing every running node."""
        running = [node for node in self.members if node.process is not None and node.process.poll() is None]
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    if await self._serves_metadata(running):
                        return
                    await asyncio.sleep(0.2)
        except TimeoutError as exc:
            raise BrokerError(
                f"Kafka did not serve metadata within {timeout_s} s; see {self.directory}"
            ) from exc

    async def _serves_metadata(self, running: list[Node]) -> bool:
        for node in running:
            if node.process is not None and node.process.poll() is not None:
                raise BrokerError(f"Kafka node {node.node_id} exited; see {node.directory / 'stdout.log'}")
        if not all([await _listening(node.port) for node in running]):
            return False  # a client would only log its failed connections
        client = kafka_client(replace(self.access, bootstrap=",".join(node.address for node in running)))
        try:
            await client.bootstrap()
            metadata = await client.fetch_all_metadata()
            return len(metadata.brokers()) >= len(running)
        except (KafkaError, OSError):
            return False
        finally:
            with contextlib.suppress(Exception):
                await client.close()

    def active_controller(self) -> int:
        """The node id of the quorum's leader, as the running nodes last recorded it."""
        states = []
        for node in self.members:
            if node.process is None or node.process.poll() is not None:
                continue
            path = node.directory / "data" / "__cluster_metadata-0" / "quorum-state"
            with contextlib.suppress(OSError, ValueError):
                states.append(json.loads(path.read_text()))
        leading = [state for state in states if state.get("leaderId", -1) >= 0]
        if not leading:
            raise BrokerError("no running Kafka node knows the quorum's leader")
        return int(max(leading, key=lambda state: state["leaderEpoch"])["leaderId"])

    async def leaders(self, topic: str) -> dict[int, int]:
        """Each partition of `topic` with the node id of its leader (-1: none)."""
        admin = kafka_admin(self.access)
        await admin.start()
        try:
            (described,) = await admin.describe_topics([topic])
        finally:
            await admin.close()
        return {partition["partition"]: partition["leader"] for partition in described["partitions"]}

    def node(self, node_id: int) -> Node:
        return next(node for node in self.members if node.node_id == node_id)

    def kill(self, node_id: int) -> None:
        """SIGKILL: the node dies at once, as on a crash."""
        process = self.node(node_id).process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def pause(self, node_id: int) -> None:
        self._signal(node_id, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        self._signal(node_id, signal.SIGCONT)

    def _signal(self, node_id: int, signum: signal.Signals) -> None:
        process = self.node(node_id).process
        if process is not None and process.poll() is None:
            process.send_signal(signum)

    async def restart(self, node_id: int) -> None:
        """Starts a node that was killed again, on its ports and data, and waits until it serves."""
        node = self.node(node_id)
        if node.process is not None and node.process.poll() is None:
            return
        self._launch(node)
        await self.ready()

    def stop(self) -> None:
        for node in self.members:
            process = node.process
            if process is None or process.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGCONT)  # a paused node must run to stop
                process.terminate()
        for node in self.members:
            process = node.process
            if process is None:
                continue
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        atexit.unregister(self.stop)
