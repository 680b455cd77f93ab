"""The Atom feed of monitor changes is one a feed reader takes, whatever a page put in its diff."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4
from xml.etree import ElementTree

import feedparser

from projections.monitor_views import ChangeView, FeedEntry
from schemas.enums import ChangeKind
from streams.web.monitors.atom import ATOM, atom_feed


def entry(kind: ChangeKind, diff: str, words: str = "", minute: int = 0) -> FeedEntry:
    change = ChangeView(
        check_job_id=uuid4(),
        detected_at=datetime(2026, 12, 6, 10, minute, tzinfo=UTC),
        kind=kind,
        diff=diff,
        diff_truncated=False,
        word_diff=words,
        lines_added=1,
        lines_removed=1,
        fingerprint="f",
        previous_artifact=None,
        current_artifact=None,
        offer=None,
    )
    return FeedEntry(
        monitor_id=uuid4(), name="pricing <&>", url="https://shop.example/kettle?a=1&b=2", change=change
    )


def test_a_feed_of_changes_is_valid_atom_with_an_entry_per_change():
    entries = [
        entry(ChangeKind.CHANGED, "-Price: 9\n+Price: 10", "Price: [-9-]{+10+}", minute=5),
        entry(ChangeKind.NEW, "+Price: 9\x00\x1b[31m\ufffe"),  # a page's control bytes
    ]
    body = atom_feed(
        uuid4(), "Changes of svc-a's monitors", "http://127.0.0.1:8080/", "/monitors/changes.atom", entries
    )
    root = ElementTree.fromstring(body)  # noqa: S314 (the feed under test is ours)
    assert root.tag == f"{{{ATOM}}}feed"
    for required in ("id", "title", "updated", "author"):
        assert root.find(f"{{{ATOM}}}{required}") is not None
    parsed = feedparser.parse(body)
    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.version == "atom10"
    assert parsed.feed.updated == "2026-12-06T10:05:00Z"
    assert parsed.feed.links[0].href == "http://127.0.0.1:8080/monitors/changes.atom"
    first, second = parsed.entries
    assert first.title == "pricing <&>: CHANGED (+1 -1)"
    assert first.summary == "Price: [-9-]{+10+}"
    assert first.link == "https://shop.example/kettle?a=1&b=2"
    assert first.id == f"urn:uuid:{entries[0].change.check_job_id}"
    assert first.tags[0].term == "CHANGED"
    assert second.summary == "+Price: 9[31m"


def test_a_feed_without_changes_is_valid_too():
    parsed = feedparser.parse(
        atom_feed(uuid4(), "Changes of monitor x", "http://h/", "/monitors/x/changes.atom", [])
    )
    assert not parsed.bozo
    assert parsed.entries == []
