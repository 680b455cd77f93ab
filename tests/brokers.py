"""Which broker a test talks to: the embedded tansu, or Apache Kafka (one combined KRaft node).

The suite runs its broker tests on both (`--broker tansu|kafka|both`, both by default); each
broker registers its bootstrap here, so settings and clients made from a bootstrap get its profile.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from streams.broker.access import KafkaAccess, plaintext
from streams.broker.compat import EMBEDDED_TANSU, KAFKA, BrokerProfile
from streams.runtime.topics import ensure_topics
from streams.settings import Settings, load_settings

ROOT = Path(__file__).parent.parent
POM = ROOT / "tests" / "kafka" / "pom.xml"
_PROFILES: dict[str, str] = {}  # bootstrap -> the `broker_profile` setting for it


@dataclass(frozen=True)
class TestBroker:
    kind: str  # "tansu" or "kafka"
    bootstrap: str

    @property
    def profile_name(self) -> str:
        return "kafka" if self.kind == "kafka" else "embedded"

    @property
    def profile(self) -> BrokerProfile:
        return KAFKA if self.kind == "kafka" else EMBEDDED_TANSU

    @property
    def access(self) -> KafkaAccess:
        return plaintext(self.bootstrap)


def register(broker: TestBroker) -> TestBroker:
    _PROFILES[broker.bootstrap] = broker.profile_name
    return broker


def profile_name(bootstrap: str) -> str:
    return _PROFILES.get(bootstrap, "embedded")


def profile(bootstrap: str) -> BrokerProfile:
    return KAFKA if profile_name(bootstrap) == "kafka" else EMBEDDED_TANSU


def kafka_or_skip() -> None:
    """Kafka needs Java and Maven (for its jars); a machine without them skips, CI fails."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI needs {' and '.join(missing)} to run Apache Kafka")
    if missing:
        pytest.skip(f"Apache Kafka needs {' and '.join(missing)}")


async def fresh_topics(broker: TestBroker, **more: Any) -> Settings:
    """Settings for one-partition topics of a prefix of their own on `broker` (also the group id),
    the topics made."""
    prefix = f"t{uuid4().hex[:8]}"
    settings = load_settings(
        kafka_bootstrap=broker.bootstrap,
        broker_profile=broker.profile_name,
        create_topics=True,
        topic_prefix=prefix,
        group_id=prefix,
        partitions=1,
        **more,
    )
    await ensure_topics(settings)
    return settings
