"""A job's named credential on this worker: whether it is held here, whether it may go where an
attempt would send it, and its headers (never stored, never in an outcome)."""

from __future__ import annotations

from projections.lifecycle.identity import origin_of
from projections.lifecycle.policy import CredentialGrant
from schemas.work import DueWork
from streams.fetch.http import FetchResult, local_result
from streams.settings import Settings


class Credentials:
    def __init__(self, settings: Settings) -> None:
        self._held = settings.credentials

    def unusable(self, work: DueWork) -> FetchResult | None:
        """The denial of a job whose credential this worker lacks or may not send; else None."""
        if work.credential is not None and work.credential not in self._held:
            detail = f"credential {work.credential!r} is not configured on this worker"
            return local_result("CREDENTIAL_UNAVAILABLE", detail)
        refused = self.refusal(work, proxied=False)
        return None if refused is None else local_result("CREDENTIAL_NOT_ALLOWED", refused)

    def refusal(self, work: DueWork, proxied: bool) -> str | None:
        """Why the job's credential may not go where this attempt would send it (its grant's
        origins, and a proxy only if the grant says so), checked again however it was accepted."""
        held = None if work.credential is None else self._held.get(work.credential)
        if held is None:
            return None
        grant = CredentialGrant(origins=frozenset(held.origins), through_proxy=held.through_proxy)
        refused = grant.use_refusal(origin_of(work.request.url), proxied)
        return None if refused is None else f"credential {work.credential!r}: {refused}"

    def headers(self, work: DueWork) -> dict[str, str] | None:
        """The headers of the job's credential, from this worker's settings (checked held before)."""
        held = None if work.credential is None else self._held.get(work.credential)
        return (
            None if held is None else {name: value.get_secret_value() for name, value in held.headers.items()}
        )
