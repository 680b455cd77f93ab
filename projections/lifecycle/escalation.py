"""Retry escalation across routes: an attempt blocked on a route is retried on the next one.

A transport policy names the kinds of route a job may take (`ROUTE_KINDS`), tried in the configured
order. Each route names the failure codes that mean "this exit is blocked" (by default a 403, a 429
and a connection reset). A job whose attempt failed that way on a route avoids that route from then
on; a failure that would end the job is retried instead while a route it has not been blocked on is
left, within the attempt budget and the deadline like any other retry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import msgspec

from schemas.enums import FailureDisposition, TransportPolicy
from schemas.records import Attempt, Failure

ROUTE_KINDS: Mapping[TransportPolicy, frozenset[str]] = {
    TransportPolicy.DIRECT_ONLY: frozenset({"direct"}),
    TransportPolicy.PROXY_ALLOWED: frozenset({"direct", "proxy"}),
    TransportPolicy.BROWSER: frozenset({"browser"}),
}
BLOCKED_BY_DEFAULT = ("HTTP_403", "HTTP_429", "CONNECTION_RESET")


@dataclass(frozen=True)
class RouteLadder:
    """The routes each transport policy may take, in order, and per route the failure codes after
    which a retry moves on from it."""

    candidates: Mapping[TransportPolicy, tuple[str, ...]] = field(default_factory=dict)
    blocked_on: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def blocks(self, attempt: Attempt) -> bool:
        """Whether the attempt's failure says its route is blocked for this request."""
        route = attempt.route_name
        return (
            route is not None
            and attempt.failure is not None
            and attempt.failure.code in self.blocked_on.get(route, frozenset())
        )

    def avoided(self, attempts: tuple[Attempt, ...]) -> tuple[str, ...]:
        """The routes a job's earlier attempts were blocked on, in the order first blocked."""
        return tuple(dict.fromkeys(a.route_name for a in attempts if a.route_name and self.blocks(a)))

    def escalated(self, failure: Failure, policy: TransportPolicy, attempts: tuple[Attempt, ...]) -> Failure:
        """The failure of the latest of `attempts`, made retryable when it blocked its route and
        another route is left to the job."""
        if (
            failure.disposition is FailureDisposition.RETRYABLE
            or not attempts
            or not self.blocks(attempts[-1])
        ):
            return failure
        avoided = set(self.avoided(attempts))
        left = [name for name in self.candidates.get(policy, ()) if name not in avoided]
        if not left:
            return failure
        return msgspec.structs.replace(
            failure,
            disposition=FailureDisposition.RETRYABLE,
            safe_message=f"{failure.safe_message} (retried on another route)",
        )


NO_LADDER = RouteLadder()  # no routes configured: nothing to escalate to
