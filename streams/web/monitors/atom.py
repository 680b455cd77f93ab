"""Monitor changes as an Atom feed (RFC 4287): an entry per change, its diff as the entry's text."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from uuid import UUID
from xml.etree import ElementTree

from projections.monitor_views import FeedEntry

ATOM = "http://www.w3.org/2005/Atom"
MEDIA_TYPE = "application/atom+xml"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UNWRITABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def atom_feed(
    feed_id: UUID, title: str, base_url: str, self_path: str, entries: Sequence[FeedEntry]
) -> bytes:
    """The feed of `entries` (newest first) served at `base_url` + `self_path`; its `updated` is the
    newest entry's time."""
    base_url = base_url.rstrip("/")
    feed = ElementTree.Element("feed", xmlns=ATOM)
    _text(feed, "id", feed_id.urn)
    _text(feed, "title", title)
    _text(feed, "updated", _instant(entries[0].change.detected_at if entries else EPOCH))
    ElementTree.SubElement(feed, "link", rel="self", href=base_url + self_path, type=MEDIA_TYPE)
    _text(ElementTree.SubElement(feed, "author"), "name", "scrapestream")
    _text(feed, "generator", "scrapestream")
    for entry in entries:
        change = entry.change
        item = ElementTree.SubElement(feed, "entry")
        _text(item, "id", change.check_job_id.urn)
        kinds = [change.kind, *([] if change.offer is None else change.offer.kinds)]
        _text(
            item, "title", f"{entry.name}: {', '.join(kinds)} (+{change.lines_added} -{change.lines_removed})"
        )
        _text(item, "updated", _instant(change.detected_at))
        ElementTree.SubElement(item, "link", rel="alternate", href=entry.url)
        ElementTree.SubElement(item, "link", rel="related", href=f"{base_url}/ui/monitors/{entry.monitor_id}")
        for kind in kinds:
            ElementTree.SubElement(item, "category", term=kind)
        summary = change.word_diff or change.diff or f"{change.kind}: {entry.url}"
        _text(item, "content", _printable(summary), type="text")
    body: bytes = ElementTree.tostring(feed, encoding="utf-8", xml_declaration=True)
    return body


def _text(parent: ElementTree.Element, tag: str, text: str, **attributes: str) -> None:
    ElementTree.SubElement(parent, tag, attributes).text = _printable(text)


def _instant(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _printable(text: str) -> str:
    """`text` without the characters XML 1.0 cannot hold (a page's control bytes)."""
    return _UNWRITABLE.sub("", text)
