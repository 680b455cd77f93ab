"""Typed records of `scrapestream.v1`: each class name and field equals its Avro schema."""

from decimal import Decimal
from uuid import UUID

from msgspec import field

from schemas.enums import (
    ArtifactTrust,
    AttemptOutcome,
    CaptureMode,
    FailureDisposition,
    HttpMethod,
    OfferChangeKind,
    PolicyClass,
    TransportPolicy,
    TransportRoute,
)
from schemas.types import Instant, Money, Record


class Request(Record, frozen=True, kw_only=True):
    url: str
    method: HttpMethod = HttpMethod.GET
    headers: dict[str, str] = field(default_factory=dict)


class Failure(Record, frozen=True, kw_only=True):
    code: str
    disposition: FailureDisposition
    retry_at: Instant | None = None
    safe_message: str


class Cost(Record, frozen=True, kw_only=True):
    # Defaults are not validated: written at the schema's scale, so a decoded cost reads the same.
    estimated: Money = Decimal("0.000000")
    actual: Money = Decimal("0.000000")
    bytes: int = 0
    browser_seconds: Money = Decimal("0.000000")


class RenderOptions(Record, frozen=True, kw_only=True):
    wait_until: str = "load"
    wait_selector: str | None = None
    viewport_width: int = 1280
    viewport_height: int = 720
    full_page: bool = False


class Artifact(Record, frozen=True, kw_only=True):
    artifact_id: UUID
    key: str
    content_type: str
    size_bytes: int
    sha256: str
    expires_at: Instant | None = None
    location: str | None = None


class Attempt(Record, frozen=True, kw_only=True):
    attempt_number: int
    lease_id: UUID
    route: TransportRoute
    outcome: AttemptOutcome
    trust: ArtifactTrust
    http_status: int | None = None
    final_url: str | None = None
    bytes: int = 0
    elapsed_ms: int = 0
    failure: Failure | None = None
    cost: Cost = Cost()
    artifacts: tuple[Artifact, ...] = ()
    etag: str | None = None
    last_modified: str | None = None
    finished_at: Instant
    from_cache: bool = False
    fresh_for_ms: int | None = None
    storable: bool = True
    route_name: str | None = None
    blocked_requests: tuple[str, ...] = ()
    must_revalidate: bool = False
    cached_at: Instant | None = None
    cache_entry_job_id: UUID | None = None
    requests: int = 0


ALL_WEEKDAYS = (0, 1, 2, 3, 4, 5, 6)


class MonitorWindow(Record, frozen=True, kw_only=True):
    start_minute: int
    end_minute: int
    weekdays: tuple[int, ...] = ALL_WEEKDAYS


class MonitorSchedule(Record, frozen=True, kw_only=True):
    every_s: int | None = None
    cron: str | None = None
    time_zone: str = "UTC"
    jitter_s: int = 0
    window: MonitorWindow | None = None


class Offer(Record, frozen=True, kw_only=True):
    amount: str | None = None
    currency: str | None = None
    availability: str | None = None


class OfferChange(Record, frozen=True, kw_only=True):
    kinds: tuple[OfferChangeKind, ...] = ()
    previous: Offer | None = None
    current: Offer | None = None


class VisualDifference(Record, frozen=True, kw_only=True):
    ratio: float
    threshold: float
    difference: Artifact | None = None


class MonitorSpec(Record, frozen=True, kw_only=True):
    request: Request
    schedule: MonitorSchedule
    job_type: str = "http.fetch"
    policy_class: PolicyClass = PolicyClass.STANDARD
    capture_mode: CaptureMode = CaptureMode.RAW_BODY
    transport_policy: TransportPolicy = TransportPolicy.DIRECT_ONLY
    render: RenderOptions | None = None
    credential: str | None = None
    callback_url: str | None = None
    conditional: bool = True
    watch: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    select: str | None = None
    trigger: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    insensitive: bool = False
    product: bool = False
    visual_threshold: float | None = None
