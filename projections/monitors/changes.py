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


def change_of(
    seen: Seen, status: int, fingerprint: str | None, *, announced: bool = True
) -> tuple[ChangeKind | None, Seen]:
    """The change a check's answer is (None for none) and what the monitor knows after it. A 304
    is unchanged, as is content that could not be read (no `fingerprint`); 404 and 410 say the
    page is gone; any other failure says nothing of the page. New or changed content that is not
    `announced` (no changed line matched a trigger) is known, not a change."""
    if status in GONE_STATUSES:
        removed = seen.fingerprint is not None and not seen.gone
        return (ChangeKind.REMOVED if removed else None), Seen(seen.fingerprint, gone=True)
    if status == NOT_MODIFIED or fingerprint is None or not 200 <= status < 300:
        return None, seen
    after = Seen(fingerprint)
    if seen.gone and seen.fingerprint is not None:
        return ChangeKind.RESTORED, after
    if seen.fingerprint is None:
        return (ChangeKind.NEW if announced else None), after
    return (ChangeKind.CHANGED if fingerprint != seen.fingerprint and announced else None), after
