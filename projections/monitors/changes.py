"""Which change a check found, beside what its monitor saw before: the rule, apart from any I/O."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.enums import ChangeKind

GONE_STATUSES = frozenset({404, 410})
NOT_MODIFIED = 304


@dataclass(frozen=True, slots=True)
class Seen:
    """What a monitor knows of its page: the fingerprint of the last content it answered with, and
    whether the last answer said the page is gone."""

    fingerprint: str | None = None
    gone: bool = False


def change_of(seen: Seen, status: int, fingerprint: str | None) -> tuple[ChangeKind | None, Seen]:
    """The change a check's answer is (None for none) and what the monitor knows after it. A 304
    is unchanged, as is content that could not be read (no `fingerprint`); 404 and 410 say the
    page is gone; any other failure says nothing of the page."""
    if status in GONE_STATUSES:
        removed = seen.fingerprint is not None and not seen.gone
        return (ChangeKind.REMOVED if removed else None), Seen(seen.fingerprint, gone=True)
    if status == NOT_MODIFIED or fingerprint is None or not 200 <= status < 300:
        return None, seen
    after = Seen(fingerprint)
    if seen.fingerprint is None:
        return ChangeKind.NEW, after
    if seen.gone:
        return ChangeKind.RESTORED, after
    return (ChangeKind.CHANGED if fingerprint != seen.fingerprint else None), after
