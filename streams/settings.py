"""Deployment settings from `SCRAPESTREAM_*` environment variables, validated once at start."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal
from ipaddress import IPv4Network, IPv6Network
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import pydantic_settings
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from projections.lifecycle.escalation import BLOCKED_BY_DEFAULT, ROUTE_KINDS, RouteLadder
from projections.lifecycle.identity import origin_of
from projections.lifecycle.policy import CallbackPolicy, CredentialGrant, ExecutionProfile, Policy
from schemas.contract import PUBLIC_TOPICS
from schemas.enums import ArtifactTrust, PolicyClass
from schemas.types import to_cost_scale
from streams.broker.access import KafkaAccess, SaslMechanism, SecurityProtocol
from streams.broker.compat import EMBEDDED_TANSU, KAFKA, BrokerProfile
from streams.errors import UsageError

TOPIC_NAMES = (
    "submit",
    "commands",
    "events",
    "due",
    "completions",
    "outbox",
    "dead-input",
    "answers",
    "cache",
    "snapshots",
    "references",
    "routes",
    "controls",
    "checks",
    "changes",
)


class SettingsError(UsageError):
    """Settings that cannot run; the message lists each bad variable."""


class ResponseLimits(BaseModel):
    """What a policy class allows one response: its size, redirects and time, and robots.txt."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_body_bytes: int = Field(ge=1)
    max_decoded_bytes: int = Field(ge=1)
    max_redirects: int = Field(ge=0, le=20)
    timeout_s: float = Field(gt=0, le=3_600)
    obey_robots: bool


MIB = 1024 * 1024
POLICY_CLASS_DEFAULTS: dict[PolicyClass, dict[str, Any]] = {
    PolicyClass.STANDARD: {
        "max_body_bytes": 10 * MIB,
        "max_decoded_bytes": 20 * MIB,
        "max_redirects": 5,
        "timeout_s": 30.0,
        "obey_robots": False,
    },
    PolicyClass.STRICT: {
        "max_body_bytes": 2 * MIB,
        "max_decoded_bytes": 4 * MIB,
        "max_redirects": 3,
        "timeout_s": 15.0,
        "obey_robots": True,
    },
    PolicyClass.LARGE: {
        "max_body_bytes": 100 * MIB,
        "max_decoded_bytes": 200 * MIB,
        "max_redirects": 5,
        "timeout_s": 120.0,
        "obey_robots": False,
    },
}


FailureCode = Annotated[str, StringConstraints(pattern=r"^[A-Z0-9_]{1,64}$")]
ROUTE_NAME = r"[a-z0-9][a-z0-9_.-]{0,63}"


class RouteSettings(BaseModel):
    """One named route: how it reaches origins, how far its results are trusted, what it costs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["direct", "proxy", "browser"]
    proxy_urls: tuple[SecretStr, ...] = ()  # they may carry credentials
    trust: ArtifactTrust | None = None  # None: VERIFIED, or UNTRUSTED for a proxy pool
    price_per_gb: Decimal = Field(default=Decimal(0), ge=0, le=1_000_000)
    price_per_browser_second: Decimal = Field(default=Decimal(0), ge=0, le=1_000_000)
    budget: Decimal | None = Field(default=None, ge=0, le=1_000_000_000_000)
    period_s: int = Field(default=86_400, ge=1, le=366 * 86_400)
    requests_per_s: float = Field(default=0.0, ge=0, le=100_000)
    enabled: bool = True
    # Failure codes that mean this exit is blocked: a job's retry then takes the next route.
    blocked_on: tuple[FailureCode, ...] = BLOCKED_BY_DEFAULT
    affinity: Literal["job", "request"] = "job"  # which proxy of the pool: spread by job, or one per request

    @field_validator("budget", mode="after")
    @classmethod
    def _at_cost_scale(cls, value: Decimal | None) -> Decimal | None:
        return None if value is None else to_cost_scale(value)

    @model_validator(mode="after")
    def _proxies_only_for_a_pool(self) -> RouteSettings:
        if self.kind == "proxy" and not self.proxy_urls:
            raise ValueError("a proxy route needs proxy_urls")
        if self.kind != "proxy" and self.proxy_urls:
            raise ValueError(f"a {self.kind} route takes no proxy_urls")
        for secret in self.proxy_urls:
            url = secret.get_secret_value()
            if not re.fullmatch(r"https?://[^\s/]+/?", url):
                shown = re.sub(r"//[^@/]*@", "//***@", url[:200])  # a credential never reaches a log
                raise ValueError(f"proxy URL {shown!r} is not http(s)://[user:password@]host:port")
        return self

    @property
    def resolved_trust(self) -> ArtifactTrust:
        if self.trust is not None:
            return self.trust
        return ArtifactTrust.UNTRUSTED if self.kind == "proxy" else ArtifactTrust.VERIFIED


class CredentialSettings(BaseModel):
    """A named credential jobs may carry: the headers its attempts send, who may use it, for which
    job types (empty: any), the origins it may be sent to and whether a proxy route may carry it.
    Resolved by the worker at run time; never written to a record."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    headers: dict[str, SecretStr] = Field(min_length=1)
    callers: tuple[str, ...] = ()
    job_types: tuple[str, ...] = ()
    origins: tuple[str, ...] = Field(min_length=1)
    through_proxy: bool = False

    @field_validator("origins", mode="after")
    @classmethod
    def _origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Each as `scheme://host[:port]`, spelled as the lifecycle spells a URL's origin."""
        spelled = []
        for origin in value:
            canonical = origin_of(origin)
            if (
                canonical is None
                or canonical != origin_of(canonical + "/")
                or urlsplit(origin).path not in "/"
            ):
                raise ValueError(f"origin {origin[:120]!r} is not scheme://host[:port] of http or https")
            spelled.append(canonical)
        return tuple(spelled)


class HostOverride(BaseModel):
    """One host's own politeness limits; what it leaves out is the deployment's default."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    concurrency: int | None = Field(default=None, ge=1, le=512)
    requests_per_s: float | None = Field(default=None, ge=0, le=10_000)


MAX_PROCESSES = 256


class SettingValues(BaseSettings):
    """Every setting, read from `SCRAPESTREAM_…` variables, each checked on its own."""

    model_config = SettingsConfigDict(env_prefix="SCRAPESTREAM_", frozen=True, extra="ignore")

    kafka_bootstrap: str = "127.0.0.1:9092"
    broker_profile: Literal["kafka", "embedded"] = "kafka"
    data_dir: Path = Path(".scrapestream/data")
    artifact_dir: Path | None = None
    web_host: str = "127.0.0.1"
    web_port: int = Field(default=8080, ge=0, le=65535)
    partitions: int = Field(default=4, ge=1, le=1024)
    processes: Literal["auto"] | int = "auto"
    replication_factor: int = Field(default=1, ge=1, le=16)
    min_insync_replicas: int | None = Field(default=None, ge=1, le=16)
    processing_guarantee: Literal["exactly_once", "at_least_once"] | None = None
    session_timeout_ms: int | None = Field(default=None, ge=1_000, le=3_600_000)
    compression: Literal["zstd", "lz4", "gzip", "snappy", "none"] = "zstd"
    create_topics: bool = False
    compacted_segment_ms: int = Field(default=3_600_000, ge=1_000)
    compacted_dirty_ratio: float = Field(default=0.5, gt=0, le=1)
    group_id: str | None = None
    topic_prefix: str = "scrapestream"
    kafka_security_protocol: SecurityProtocol = "PLAINTEXT"
    kafka_sasl_mechanism: SaslMechanism | None = None
    kafka_sasl_username: str | None = Field(default=None, min_length=1, max_length=256)
    kafka_sasl_password: SecretStr | None = None
    kafka_sasl_password_file: Path | None = None
    kafka_ssl_ca_file: Path | None = None
    kafka_ssl_cert_file: Path | None = None
    kafka_ssl_key_file: Path | None = None
    kafka_ssl_check_hostname: bool = True
    public_compression: Literal["gzip", "none"] = "gzip"

    allow_private_networks: bool = False
    allowed_networks: tuple[IPv4Network | IPv6Network, ...] = ()
    executor_concurrency: int = Field(default=8, ge=0, le=512)
    executor_caller_share: float = Field(default=0.75, gt=0, le=1)
    outbox_concurrency: int = Field(default=8, ge=1, le=512)
    profiles: dict[str, tuple[float, float]] = {"http.fetch": (30_000, 3), "browser.render": (60_000, 3)}
    job_type_labels: dict[str, Annotated[str, StringConstraints(max_length=120)]] = {}
    credentials: dict[
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,64}$")], CredentialSettings
    ] = {}
    default_max_runtime_ms: int = Field(default=30_000, ge=0)
    default_max_attempts: int = Field(default=3, ge=1)
    lease_grace_ms: int = Field(default=10_000, ge=0)
    start_window_ms: int = Field(default=60_000, ge=1_000)
    retry_base_ms: int = Field(default=1_000, ge=1)
    retry_max_ms: int = Field(default=3_600_000, ge=1)
    max_denials: int = Field(default=100, ge=1)
    timer_interval_ms: int = Field(default=100, ge=10)
    timers_per_pass: int = Field(default=2_000, ge=1)
    shutdown_grace_s: float = Field(default=10.0, ge=0)

    policy_classes: dict[PolicyClass, ResponseLimits] = Field(
        default_factory=lambda: {
            name: ResponseLimits(**limits) for name, limits in POLICY_CLASS_DEFAULTS.items()
        }
    )
    host_concurrency: int = Field(default=8, ge=1, le=512)
    host_requests_per_s: float = Field(default=0.0, ge=0, le=10_000)
    host_limits: dict[str, HostOverride] = {}

    browser_executable: str = "chromium"
    browser_cdp_url: str | None = None
    browser_concurrency: int = Field(default=2, ge=1, le=64)
    browser_proxy_host: str = "127.0.0.1"
    routes: dict[str, RouteSettings] = Field(
        default_factory=lambda: {
            "direct": RouteSettings(kind="direct"),
            "browser": RouteSettings(kind="browser"),
        }
    )

    auth_enabled: bool = True
    principals_file: Path | None = None
    principals: SecretStr | None = None
    advertised_url: str | None = None
    trace_url_template: str | None = None
    peer_timeout_s: float = Field(default=5.0, gt=0, le=60)
    peer_secret: SecretStr | None = None
    peer_secret_file: Path | None = None
    refusals_per_minute: int = Field(default=60, ge=1, le=100_000)
    remote_result_max_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    as_of_max_records: int = Field(default=500_000, ge=1_000)
    max_request_body_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    max_monitors_per_caller: int = Field(default=100, ge=1, le=100_000)
    monitor_first_check_spread_s: int = Field(default=10, ge=0, le=3_600)
    http_head_timeout_s: float = Field(default=10.0, gt=0, le=300)
    http_body_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    deployment_id: str = Field(default="", max_length=256)

    artifact_store: Literal["local", "s3"] = "local"
    s3_bucket: str | None = None
    s3_prefix: str = "artifacts/"
    s3_endpoint_url: str | None = None
    s3_region: str = "us-east-1"
    s3_access_key_id: str | None = None
    s3_secret_access_key: SecretStr | None = None
    s3_create_bucket: bool = False

    schema_registry_url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    schema_registry_basic_auth: SecretStr | None = None
    schema_registry_timeout_s: float = Field(default=10.0, gt=0, le=120)
    schema_registry_ca_file: Path | None = None

    maintenance_interval_s: float = Field(default=60.0, gt=0)
    maintenance_batch: int = Field(default=1_000, ge=1, le=100_000)
    history_retention_days: float = Field(default=30.0, ge=0)
    audit_retention_days: float = Field(default=0.0, ge=0)
    orphan_grace_hours: float = Field(default=24.0, gt=0)
    snapshot_interval_s: float = Field(default=5.0, gt=0)
    events_retention_hours: float = Field(default=168.0, ge=0)
    accept_log_gap: tuple[int, ...] = ()

    callback_secret: SecretStr | None = None
    replays_per_receiver_per_s: float = Field(default=10.0, gt=0, le=1_000)
    callback_key_generations: dict[str, tuple[Annotated[int, Field(ge=1)], ...]] = {}
    callback_max_elapsed_s: float = Field(default=86_400.0, gt=0)
    callback_max_attempts: int = Field(default=25, ge=1)
    callback_retry_base_s: float = Field(default=1.0, gt=0)
    callback_retry_max_s: float = Field(default=3_600.0, gt=0)
    callback_timeout_s: float = Field(default=10.0, gt=0, le=300)

    @field_validator("processes", mode="before")
    @classmethod
    def _process_count(cls, value: object) -> object:
        text = str(value).strip()
        if text == "auto":
            return text
        if not text.isdigit() or not 1 <= int(text) <= MAX_PROCESSES:
            raise ValueError(f"must be auto or a number of processes from 1 to {MAX_PROCESSES}")
        return int(text)

    @field_validator("trace_url_template")
    @classmethod
    def _trace_viewer(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith(("http://", "https://")) or "{trace_id}" not in value):
            raise ValueError("must be an http(s) URL with {trace_id} in it")
        return value

    @field_validator("callback_secret")
    @classmethod
    def _standard_webhooks_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        raw = value.get_secret_value()
        if not raw.startswith("whsec_"):
            raise ValueError("must start with whsec_ (a Standard Webhooks secret)")
        try:
            base64.b64decode(raw.removeprefix("whsec_"), validate=True)
        except ValueError as exc:
            raise ValueError("the part after whsec_ must be base64") from exc
        return value

    @field_validator("policy_classes", mode="before")
    @classmethod
    def _over_the_defaults(cls, value: Any) -> Any:
        """Each class's limits as given, the rest of them its defaults."""
        if not isinstance(value, dict):
            return value
        unknown = sorted(str(name) for name in value if name not in POLICY_CLASS_DEFAULTS)
        if unknown:
            raise ValueError(
                f"unknown policy classes {unknown}; known: {[str(n) for n in POLICY_CLASS_DEFAULTS]}"
            )
        merged: dict[PolicyClass, Any] = {}
        for name, defaults in POLICY_CLASS_DEFAULTS.items():
            given = value.get(name, {})
            merged[name] = defaults | given if isinstance(given, dict) else given  # else refused as it is
        return merged

    @field_validator("host_limits", mode="after")
    @classmethod
    def _lower_case_hosts(cls, value: dict[str, HostOverride]) -> dict[str, HostOverride]:
        return {host.strip().lower().rstrip("."): limit for host, limit in value.items()}

    @field_validator("routes", mode="after")
    @classmethod
    def _named_routes(cls, value: dict[str, RouteSettings]) -> dict[str, RouteSettings]:
        bad = sorted(name[:80] for name in value if not re.fullmatch(ROUTE_NAME, name))
        if bad:
            raise ValueError(f"route names must match {ROUTE_NAME}: {bad}")
        return value


class Settings(SettingValues):
    """The settings checked against each other, and what the shell derives from them."""

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        """Every setting that contradicts another, named at once."""
        problems = []
        if self.min_insync_replicas is not None and self.min_insync_replicas > self.replication_factor:
            problems.append(
                "SCRAPESTREAM_MIN_INSYNC_REPLICAS is larger than SCRAPESTREAM_REPLICATION_FACTOR: "
                "no write could succeed"
            )
        if self.peer_secret is not None and self.peer_secret_file is not None:
            problems.append("set SCRAPESTREAM_PEER_SECRET or SCRAPESTREAM_PEER_SECRET_FILE, not both")
        if self.artifact_store == "s3" and not self.s3_bucket:
            problems.append("SCRAPESTREAM_ARTIFACT_STORE=s3 needs SCRAPESTREAM_S3_BUCKET")
        if self.kafka_sasl_password is not None and self.kafka_sasl_password_file is not None:
            problems.append(
                "set SCRAPESTREAM_KAFKA_SASL_PASSWORD or SCRAPESTREAM_KAFKA_SASL_PASSWORD_FILE, not both"
            )
        problems.extend(
            self.kafka_access.problems(password_from_file=self.kafka_sasl_password_file is not None)
        )
        if problems:
            raise ValueError("\n  ".join(problems))
        return self

    @property
    def local_artifacts(self) -> Path:
        return self.data_dir / "artifacts" if self.artifact_dir is None else self.artifact_dir

    @property
    def resolved_min_insync_replicas(self) -> int:
        """`min.insync.replicas` of every topic: as set, else one less than the replication factor
        (two of three), at least one."""
        if self.min_insync_replicas is not None:
            return self.min_insync_replicas
        return max(1, min(2, self.replication_factor - 1))

    @property
    def client_profile(self) -> BrokerProfile:
        """How clients talk to the broker: the broker profile's tuning, with the session timeout
        as set (a shorter one moves a dead worker's partitions sooner, and evicts a paused one)."""
        base = EMBEDDED_TANSU if self.broker_profile == "embedded" else KAFKA
        profile = replace(
            base,
            compression_type=None if self.compression == "none" else self.compression,
            public_compression_type=None if self.public_compression == "none" else self.public_compression,
        )
        if self.session_timeout_ms is None:
            return profile
        heartbeat = min(base.heartbeat_interval_ms, self.session_timeout_ms // 3)
        return replace(profile, session_timeout_ms=self.session_timeout_ms, heartbeat_interval_ms=heartbeat)

    @property
    def kafka_access(self) -> KafkaAccess:
        """How every Kafka client of this deployment reaches the cluster (`streams.broker.access`)."""
        return KafkaAccess(
            self.kafka_bootstrap,
            self.kafka_security_protocol,
            self.kafka_sasl_mechanism,
            self.kafka_sasl_username,
            self.kafka_sasl_password,
            self.kafka_sasl_password_file,
            self.kafka_ssl_ca_file,
            self.kafka_ssl_cert_file,
            self.kafka_ssl_key_file,
            self.kafka_ssl_check_hostname,
        )

    @property
    def exactly_once(self) -> bool:
        """The processing guarantee as set, else exactly once on Kafka (`kafka` profile) and at
        least once on the embedded broker, which cannot start a transactional producer."""
        if self.processing_guarantee is not None:
            return self.processing_guarantee == "exactly_once"
        return self.broker_profile == "kafka"

    @property
    def consumer_group(self) -> str:
        """The workers' consumer group: the topic prefix's unless set, so deployments sharing a broker
        never share a group."""
        return self.group_id or self.topic_prefix

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}.{name}"

    @property
    def public_topics(self) -> frozenset[str]:
        """The topics workers write and outside clients read (the contract's)."""
        return frozenset(self.topic(each.topic) for each in PUBLIC_TOPICS if each.written_by_workers)

    def due_topic(self, runner: str) -> str:
        """Where due work of a job type goes: `http.fetch`'s on `due`, every other type's on its own
        topic, which only workers that run the type read."""
        if runner == "http.fetch":
            return self.topic("due")
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", runner):
            runner = "x" + hashlib.sha256(runner.encode()).hexdigest()[:32]
        return self.topic(f"due.{runner}")

    @property
    def route_ladder(self) -> RouteLadder:
        """The enabled routes each transport policy may take, in the configured order."""
        return RouteLadder(
            candidates={
                policy: tuple(
                    name for name, route in self.routes.items() if route.enabled and route.kind in kinds
                )
                for policy, kinds in ROUTE_KINDS.items()
            },
            blocked_on={name: frozenset(route.blocked_on) for name, route in self.routes.items()},
        )

    def policy(self, declared: Mapping[str, tuple[float, float]] | None = None) -> Policy:
        """The lifecycle's rules for this deployment; `declared` are the profiles job types declare
        themselves (`SCRAPESTREAM_PROFILES` wins)."""
        callbacks = CallbackPolicy(
            retry_base_ms=int(self.callback_retry_base_s * 1000),
            retry_max_ms=int(self.callback_retry_max_s * 1000),
            max_elapsed_ms=int(self.callback_max_elapsed_s * 1000),
            max_attempts=self.callback_max_attempts,
            attempt_timeout_ms=int(self.callback_timeout_s * 1000),
        )
        return Policy.from_declared(
            dict(declared or {}) | self.profiles,
            ExecutionProfile(self.default_max_runtime_ms, self.default_max_attempts),
            lease_grace_ms=self.lease_grace_ms,
            retry_base_ms=self.retry_base_ms,
            retry_max_ms=self.retry_max_ms,
            start_window_ms=self.start_window_ms,
            max_denials=self.max_denials,
            first_check_spread_s=self.monitor_first_check_spread_s,
            callbacks=callbacks,
            routes=self.route_ladder,
            credentials={
                name: CredentialGrant(
                    frozenset(granted.callers),
                    frozenset(granted.job_types),
                    frozenset(granted.origins),
                    granted.through_proxy,
                )
                for name, granted in self.credentials.items()
            },
        )


def on_embedded_broker(settings: Settings, bootstrap: str, **more: Any) -> Settings:
    """`settings` pointed at the embedded broker at `bootstrap`: its profile, and an open connection
    whatever Kafka login the environment holds for another cluster."""
    logins = [name for name in Settings.model_fields if name.startswith(("kafka_sasl_", "kafka_ssl_"))]
    update: dict[str, Any] = dict.fromkeys(logins)
    update |= {"kafka_ssl_check_hostname": True, "kafka_security_protocol": "PLAINTEXT"}
    update |= {"kafka_bootstrap": bootstrap, "broker_profile": "embedded"}
    return settings.model_copy(update=update | more)


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment plus `overrides`; a clear `SettingsError` when invalid, naming
    each variable (and, inside a JSON one, where in it) and what is wrong."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except pydantic_settings.SettingsError as exc:  # a JSON variable that is not JSON at all
        raise SettingsError(_unparsable(exc)) from None
    except ValidationError as exc:
        problems = [_problem(error) for error in exc.errors()]
        raise SettingsError("invalid settings:\n  " + "\n  ".join(problems)) from None


def _problem(error: Any) -> str:
    location = [str(part) for part in error["loc"]]
    message = str(error["msg"]).removeprefix("Value error, ")
    if not location:
        return message
    variable = f"SCRAPESTREAM_{location[0].upper()}"
    inside = f" at {'.'.join(location[1:])}" if len(location) > 1 else ""
    return f"{variable}{inside}: {message}"


def _unparsable(exc: Exception) -> str:
    found = re.search(r'field "([a-z_]+)"', str(exc))
    variable = f"SCRAPESTREAM_{found.group(1).upper()}" if found else "a setting"
    cause = exc.__cause__ or exc.__context__
    detail = f": {cause}" if cause is not None else ""
    return f"invalid settings:\n  {variable} is not valid JSON{detail}"
