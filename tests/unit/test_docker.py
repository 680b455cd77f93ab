"""The production shape in `docker/` stays true: real settings with valid values, the tested Kafka."""

import re
from pathlib import Path
from typing import Any

import yaml

from bench.kafka import KAFKA_VERSION
from streams.settings import Settings, load_settings

DOCKER = Path(__file__).parent.parent.parent / "docker"
COMPOSE: dict[str, Any] = yaml.safe_load((DOCKER / "compose.yaml").read_text())
# What an operator puts in docker/.env: values of the kind each variable takes.
ENV_FILE = {
    "SCRAPESTREAM_CALLBACK_SECRET": "whsec_c2NyYXBlc3RyZWFtLWNvbXBvc2UtdGVzdA==",
    "SCRAPESTREAM_PEER_SECRET": "x" * 64,
    "MINIO_ROOT_USER": "scrapestream",
    "MINIO_ROOT_PASSWORD": "long-enough-password",
}


def substituted(value: str) -> str:
    """Compose's `${NAME:?message}` and `${NAME:-default}` as docker/.env would fill them."""

    def fill(found: re.Match[str]) -> str:
        name, default = found.group(1), found.group(3) if found.group(2) == ":-" else None
        return ENV_FILE.get(name) or default or ""

    return re.sub(r"\$\{([A-Z_]+)(:[?-])?([^}]*)\}", fill, value)


def environments() -> dict[str, dict[str, str]]:
    return {
        name: {key: substituted(str(value)) for key, value in (service.get("environment") or {}).items()}
        for name, service in COMPOSE["services"].items()
    }


def test_every_scrapestream_variable_is_a_real_setting_with_a_valid_value():
    known = {f"SCRAPESTREAM_{name.upper()}" for name in Settings.model_fields}
    for service, environment in environments().items():
        values = {
            k.removeprefix("SCRAPESTREAM_").lower(): v
            for k, v in environment.items()
            if k.startswith("SCRAPESTREAM_")
        }
        if not values:
            continue
        unknown = {f"SCRAPESTREAM_{k.upper()}" for k in values} - known
        assert not unknown, f"{service}: {unknown}"
        values.pop("principals_file", None)  # read when the worker starts, not when settings load
        load_settings(**values)  # raises, naming the variable, for any value it cannot take


def test_the_brokers_run_the_kafka_version_the_suite_tests():
    images = {service["image"] for name, service in COMPOSE["services"].items() if name.startswith("kafka")}
    assert images == {f"apache/kafka:{KAFKA_VERSION}"}
    brokers = [name for name in COMPOSE["services"] if name.startswith("kafka")]
    assert len(brokers) == 3
    worker = environments()["worker-1"]
    assert worker["SCRAPESTREAM_REPLICATION_FACTOR"] == "3"
    assert worker["SCRAPESTREAM_MIN_INSYNC_REPLICAS"] == "2"


def test_topics_are_created_once_before_any_worker_starts():
    services = COMPOSE["services"]
    assert services["topics"]["command"] == ["topics", "create"]
    for worker in ("worker-1", "worker-2"):
        assert services[worker]["depends_on"]["topics"] == {"condition": "service_completed_successfully"}


def test_no_secret_is_written_in_the_compose_file():
    text = (DOCKER / "compose.yaml").read_text()
    for name in ENV_FILE:
        assert re.search(rf"\$\{{{name}:\?", text), f"{name} must come from the environment"


def test_the_image_runs_unprivileged_with_a_health_check():
    dockerfile = (DOCKER / "Dockerfile").read_text()
    user = re.search(r"^USER (\S+)", dockerfile, flags=re.M)
    assert user is not None
    assert user.group(1) not in ("root", "0")
    assert re.search(r"^HEALTHCHECK .*\n?.*readyz", dockerfile, flags=re.M)
