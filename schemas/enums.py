"""Avro enums of `scrapestream.v1` as Python enums; values equal the Avro symbols."""

from enum import StrEnum


class JobStatus(StrEnum):
    PENDING = "PENDING"
    LEASED = "LEASED"
    RETRY_WAIT = "RETRY_WAIT"
    SUCCEEDED = "SUCCEEDED"
    DEAD_LETTER = "DEAD_LETTER"
    CANCELLED = "CANCELLED"
    REJECTED = "REJECTED"


class HttpMethod(StrEnum):
    GET = "GET"
    HEAD = "HEAD"


class PolicyClass(StrEnum):
    STANDARD = "STANDARD"
    STRICT = "STRICT"
    LARGE = "LARGE"


class CacheMode(StrEnum):
    REUSE_VALID = "REUSE_VALID"
    REVALIDATE = "REVALIDATE"
    BYPASS = "BYPASS"


class CaptureMode(StrEnum):
    RAW_BODY = "RAW_BODY"
    METADATA_ONLY = "METADATA_ONLY"
    RENDERED_HTML = "RENDERED_HTML"
    SCREENSHOT = "SCREENSHOT"


class RetentionClass(StrEnum):
    TRANSIENT_24H = "TRANSIENT_24H"
    CACHE_7D = "CACHE_7D"
    REFERENCED_ARCHIVE = "REFERENCED_ARCHIVE"


class TransportPolicy(StrEnum):
    DIRECT_ONLY = "DIRECT_ONLY"
    PROXY_ALLOWED = "PROXY_ALLOWED"
    BROWSER = "BROWSER"


class TransportRoute(StrEnum):
    DIRECT = "DIRECT"
    PROXY = "PROXY"
    BROWSER = "BROWSER"


class AttemptOutcome(StrEnum):
    FETCHED = "FETCHED"
    NOT_MODIFIED = "NOT_MODIFIED"
    CACHE_HIT = "CACHE_HIT"
    HTTP_ERROR = "HTTP_ERROR"
    TIMEOUT = "TIMEOUT"
    NETWORK_ERROR = "NETWORK_ERROR"
    BLOCKED = "BLOCKED"
    TOO_LARGE = "TOO_LARGE"
    DENIED = "DENIED"


class ArtifactTrust(StrEnum):
    VERIFIED = "VERIFIED"
    UNTRUSTED = "UNTRUSTED"


class FailureDisposition(StrEnum):
    RETRYABLE = "RETRYABLE"
    TERMINAL = "TERMINAL"


class RejectionReason(StrEnum):
    INVALID_CALLER = "INVALID_CALLER"
    INVALID_URL = "INVALID_URL"
    UNSUPPORTED_SCHEME = "UNSUPPORTED_SCHEME"
    DISALLOWED_HEADER = "DISALLOWED_HEADER"
    DEADLINE_IN_PAST = "DEADLINE_IN_PAST"
    UNKNOWN_JOB_TYPE = "UNKNOWN_JOB_TYPE"
    ATTEMPT_LIMIT_OUT_OF_RANGE = "ATTEMPT_LIMIT_OUT_OF_RANGE"
    INVALID_CALLBACK_URL = "INVALID_CALLBACK_URL"
    INPUT_TOO_LARGE = "INPUT_TOO_LARGE"
    UNSUPPORTED_JOB_TYPE = "UNSUPPORTED_JOB_TYPE"


class ActorRole(StrEnum):
    SERVICE = "SERVICE"
    VIEWER = "VIEWER"
    OPERATOR = "OPERATOR"
    ADMIN = "ADMIN"


class AuditAction(StrEnum):
    JOB_CANCEL = "JOB_CANCEL"


class AuditOutcome(StrEnum):
    ALLOWED = "ALLOWED"
    DENIED = "DENIED"


class ReportKind(StrEnum):
    ATTEMPT = "ATTEMPT"
    RENEWAL = "RENEWAL"
    START = "START"


class ExpiryReason(StrEnum):
    EXPIRED = "EXPIRED"
    BEYOND_HORIZON = "BEYOND_HORIZON"
    NOT_STARTED = "NOT_STARTED"
