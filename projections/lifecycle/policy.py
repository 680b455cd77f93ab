"""Execution profiles and the arithmetic derived from them: lease, renewal, horizon, backoff.

A profile declares exactly two numbers, `max_runtime_ms` and `max_attempts`; everything
else is derived here, so the lease, the renewal interval and the reaper agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from projections.lifecycle.escalation import NO_LADDER, RouteLadder

MIN_RENEW_INTERVAL_MS = 5_000
MAX_RENEW_INTERVAL_MS = 60_000
RENEW_DIVISOR = 3  # two renewals may be missed before the lease lapses
UNBOUNDED_RUN_LEASE_MS = RENEW_DIVISOR * MIN_RENEW_INTERVAL_MS  # `max_runtime_ms = 0`: the run renews it


@dataclass(frozen=True)
class ExecutionProfile:
    max_runtime_ms: int
    max_attempts: int


@dataclass(frozen=True)
class CredentialGrant:
    """Who may hand a job a named credential, for which job types (empty: any), to which origins
    it may be sent and whether a proxy may carry it. Its value is the worker's alone: the core
    knows the name and the grant, nothing else."""

    callers: frozenset[str] = frozenset()
    job_types: frozenset[str] = frozenset()
    origins: frozenset[str] = frozenset()  # `scheme://host[:port]`, as `identity.origin_of` spells them
    through_proxy: bool = False

    def refusal(self, caller: str, job_type: str) -> str | None:
        if self.callers and caller not in self.callers:
            return f"caller {caller!r} may not use it"
        if self.job_types and job_type not in self.job_types:
            return f"job type {job_type!r} may not carry it"
        return None

    def use_refusal(self, origin: str | None, proxied: bool) -> str | None:
        """Why it may not be sent to `origin` (through a proxy when `proxied`), or None."""
        if origin is None or origin not in self.origins:
            shown = ", ".join(sorted(self.origins)) or "no origin"
            return f"it may be sent to {shown} only, not to {origin or 'that URL'}"
        if proxied and not self.through_proxy:
            return "a proxy may not carry it: submit with transport_policy DIRECT_ONLY"
        return None


@dataclass(frozen=True)
class CallbackPolicy:
    """How long and how often a terminal callback is retried, and how long one try may take."""

    retry_base_ms: int = 1_000
    retry_max_ms: int = 3_600_000
    max_elapsed_ms: int = 86_400_000
    max_attempts: int = 25
    attempt_timeout_ms: int = 10_000

    def backoff(self, attempt_number: int) -> timedelta:
        exponent = min(max(attempt_number - 1, 0), 62)
        return timedelta(milliseconds=min(self.retry_base_ms * 2**exponent, self.retry_max_ms))


@dataclass(frozen=True)
class Policy:
    """Everything the lifecycle rules read besides state, command and time."""

    profiles: Mapping[str, ExecutionProfile]
    default_profile: ExecutionProfile = ExecutionProfile(max_runtime_ms=60_000, max_attempts=3)
    lease_grace_ms: int = 10_000
    retry_base_ms: int = 1_000
    retry_max_ms: int = 3_600_000
    start_window_ms: int = 60_000
    max_denials: int = 100  # denials cost no budget; past this many the job dead letters all the same
    first_check_spread_s: int = 10  # a new monitor's first check falls this far after its creation at most
    callbacks: CallbackPolicy = CallbackPolicy()
    routes: RouteLadder = NO_LADDER
    # Switched off at run time (the controls topic): job type -> why. New submissions are rejected.
    disabled_types: Mapping[str, str] = field(default_factory=dict, compare=False)
    # What running workers' executors announce they run (None: not known yet, nothing is refused),
    # and why each type none of them runs cannot run. New submissions of such a type are rejected.
    runners: frozenset[str] | None = field(default=None, compare=False)
    cannot_run: Mapping[str, str] = field(default_factory=dict, compare=False)
    credentials: Mapping[str, CredentialGrant] = field(default_factory=dict)
    remote_types: frozenset[str] = frozenset()  # run by outside executors, which report their starts
    warnings: tuple[str, ...] = field(default=(), compare=False)
    fallbacks: frozenset[str] = field(default=frozenset(), compare=False)  # types on the default profile

    @classmethod
    def from_declared(
        cls,
        declared: Mapping[str, tuple[float, float]],
        default_profile: ExecutionProfile,
        *,
        lease_grace_ms: int = 10_000,
        retry_base_ms: int = 1_000,
        retry_max_ms: int = 3_600_000,
        start_window_ms: int = 60_000,
        max_denials: int = 100,
        callbacks: CallbackPolicy = CallbackPolicy(),
        routes: RouteLadder = NO_LADDER,
        credentials: Mapping[str, CredentialGrant] | None = None,
        first_check_spread_s: int = 10,
    ) -> Policy:
        """Register declared profiles; an unusable one falls back whole, with one warning."""
        profiles: dict[str, ExecutionProfile] = {}
        warnings: list[str] = []
        fallbacks: set[str] = set()
        for job_type, (max_runtime_ms, max_attempts) in sorted(declared.items()):
            if _usable(max_runtime_ms, 0) and _usable(max_attempts, 1):
                profiles[job_type] = ExecutionProfile(int(max_runtime_ms), int(max_attempts))
                continue
            profiles[job_type] = default_profile
            fallbacks.add(job_type)
            warnings.append(
                f"job type {job_type!r} declares an unusable execution profile "
                f"(max_runtime_ms={max_runtime_ms}, max_attempts={max_attempts}); "
                f"using the deployment defaults {default_profile}"
            )
        return cls(
            profiles,
            default_profile,
            lease_grace_ms=lease_grace_ms,
            retry_base_ms=retry_base_ms,
            retry_max_ms=retry_max_ms,
            start_window_ms=start_window_ms,
            max_denials=max_denials,
            first_check_spread_s=first_check_spread_s,
            callbacks=callbacks,
            routes=routes,
            credentials=dict(credentials or {}),
            warnings=tuple(warnings),
            fallbacks=frozenset(fallbacks),
        )

    def profile(self, job_type: str) -> ExecutionProfile | None:
        return self.profiles.get(job_type)

    def lease_ms(self, max_runtime_ms: int) -> int:
        """A started lease; with no runtime ceiling (`0`), one the run renews until the job's deadline."""
        return (max_runtime_ms or UNBOUNDED_RUN_LEASE_MS) + self.lease_grace_ms

    @property
    def lease_horizon_ms(self) -> int:
        """How far ahead a lease may legitimately point: a start window and the longest lease, plus grace."""
        runtimes = [p.max_runtime_ms for p in self.profiles.values()]
        longest = max(self.lease_ms(runtime) for runtime in [self.default_profile.max_runtime_ms, *runtimes])
        return self.start_window_ms + longest + self.lease_grace_ms

    def backoff(self, attempt_number: int) -> timedelta:
        exponent = min(max(attempt_number - 1, 0), 62)
        return timedelta(milliseconds=min(self.retry_base_ms * 2**exponent, self.retry_max_ms))


def _usable(value: float, minimum: int) -> bool:
    return (
        isinstance(value, int | float) and math.isfinite(value) and value >= minimum and value == int(value)
    )


def renew_interval_ms(lease_ms: int) -> int:
    """A third of the lease, clamped to 5-60 s; a nonsense lease renews at the floor."""
    if lease_ms < 1:
        return MIN_RENEW_INTERVAL_MS
    return min(MAX_RENEW_INTERVAL_MS, max(MIN_RENEW_INTERVAL_MS, lease_ms // RENEW_DIVISOR))


def ceil_to_millis(instant: datetime) -> datetime:
    """Round up to whole milliseconds, so a stored retry time is never earlier than computed."""
    remainder = instant.microsecond % 1000
    return instant if remainder == 0 else instant + timedelta(microseconds=1000 - remainder)
