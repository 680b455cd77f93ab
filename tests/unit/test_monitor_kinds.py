"""A monitor's typed changes, as its lifecycle decides them from a reading: a product's offer, and a
screenshot's share of changed pixels against the monitor's own threshold."""

from __future__ import annotations

from uuid import UUID

import msgspec
import pytest

from projections.artifacts import PNG, content_key
from projections.lifecycle.consequences import consequences_of
from schemas.enums import AttemptOutcome, CaptureMode, ChangeKind, OfferChangeKind, RetentionClass
from schemas.events import ChangeDetected
from schemas.records import Artifact, Offer, VisualDifference
from tests.lifecycle import POLICY, T0, Lifecycle, kinds, tick
from tests.unit.test_monitor_rules import (
    MINUTE,
    MONITOR_ID,
    SPEC,
    _content,
    create,
    denied,
    ended,
    fetched,
    reading,
)

VISUAL = msgspec.structs.replace(
    SPEC, job_type="browser.render", capture_mode=CaptureMode.SCREENSHOT, visual_threshold=0.05
)


def screenshot(letter: str) -> Artifact:
    return msgspec.structs.replace(
        _content(letter), artifact_id=UUID(int=ord(letter) + 1000), content_type=PNG
    )


def rendered(life: Lifecycle, letter: str, at):  # type: ignore[no-untyped-def]
    """A check of the visual monitor at `at`, its page and screenshot stored; the events of its fetch."""
    life(tick(MONITOR_ID), at)
    artifacts = (_content(letter), screenshot(letter))
    return life(ended(life, outcome=AttemptOutcome.FETCHED, http_status=200, artifacts=artifacts), at)


def test_a_visual_monitor_announces_a_screenshot_that_changed_over_its_threshold_only():
    life = Lifecycle()
    life(create(VISUAL))
    (fetch,) = rendered(life, "a", T0)
    assert fetch.artifact == screenshot("a")  # the screenshot is compared, not the page
    (read,) = consequences_of(life.state, [fetch], POLICY).reads
    assert read.visual_threshold == 0.05
    first = VisualDifference(ratio=1.0, threshold=0.05)
    assert kinds(life(reading(life, "pa", visual=first), T0)) == ["CheckRecorded", "ChangeDetected"]

    rendered(life, "b", T0 + MINUTE)
    below = VisualDifference(ratio=0.05, threshold=0.0)  # the reader's threshold is not the monitor's
    assert kinds(life(reading(life, "pb", visual=below, triggered=True), T0 + MINUTE)) == ["CheckRecorded"]

    rendered(life, "c", T0 + 2 * MINUTE)
    difference = msgspec.structs.replace(
        screenshot("d"), key=content_key("d" * 64, RetentionClass.CACHE_7D), sha256="d" * 64
    )
    above = VisualDifference(ratio=0.25, threshold=0.05, difference=difference)
    events = life(reading(life, "pc", visual=above, triggered=False), T0 + 2 * MINUTE)
    change = events[-1]
    assert isinstance(change, ChangeDetected)
    assert (change.kind, change.visual) == (ChangeKind.CHANGED, above)
    published = consequences_of(life.state, [change], POLICY)
    assert published.changes[0].visual == above
    (kept,) = published.references  # the difference image lives as long as the change's record says
    assert (kept.artifact_key, kept.job_id, kept.expires_at) == (difference.key, change.check_job_id, None)


@pytest.mark.parametrize("ratio", [float("nan"), 7.0, -1.0])
def test_a_ratio_no_reader_computes_is_all_changed(ratio):
    life = Lifecycle()
    life(create(VISUAL))
    rendered(life, "a", T0)
    life(reading(life, "pa", visual=VisualDifference(ratio=1.0, threshold=0.05)), T0)
    rendered(life, "b", T0 + MINUTE)
    change = life(reading(life, "pb", visual=VisualDifference(ratio=ratio, threshold=0.05)), T0 + MINUTE)[-1]
    assert isinstance(change, ChangeDetected)
    assert change.visual == VisualDifference(ratio=1.0, threshold=0.05)


@pytest.mark.parametrize(
    "spec",
    [
        msgspec.structs.replace(SPEC, visual_threshold=0.05),
        msgspec.structs.replace(VISUAL, capture_mode=CaptureMode.RENDERED_HTML),
        msgspec.structs.replace(VISUAL, visual_threshold=1.0),
        msgspec.structs.replace(VISUAL, visual_threshold=-0.1),
        msgspec.structs.replace(VISUAL, visual_threshold=float("nan")),
        msgspec.structs.replace(VISUAL, trigger=("price",)),
        msgspec.structs.replace(VISUAL, product=True),
        msgspec.structs.replace(SPEC, product=True, watch=("main",)),
        msgspec.structs.replace(SPEC, product=True, select="price"),
    ],
    ids=[
        "no browser",
        "no screenshot",
        "every pixel",
        "negative",
        "not a number",
        "a trigger on pixels",
        "pixels and an offer",
        "an offer and a selector",
        "an offer and a JSON selection",
    ],
)
def test_a_monitor_that_cannot_compare_as_asked_is_refused(spec):
    assert denied(Lifecycle()(create(spec))) == "invalid"


def test_a_product_monitors_change_carries_its_offer_typed():
    life = Lifecycle()
    life(create(msgspec.structs.replace(SPEC, product=True)))
    kettle = Offer(amount="39.90", currency="EUR", availability="InStock")
    cheaper = msgspec.structs.replace(kettle, amount="34.50")
    life(tick(MONITOR_ID), T0)
    life(fetched(life, _content("a")), T0)
    new = life(reading(life, "fa", offer=kettle), T0)[-1]
    assert isinstance(new, ChangeDetected)
    assert new.offer is not None
    assert (new.offer.kinds, new.offer.previous, new.offer.current) == ((), None, kettle)
    life(tick(MONITOR_ID), T0 + MINUTE)
    life(
        ended(life, outcome=AttemptOutcome.FETCHED, http_status=200, artifacts=(_content("b"),)), T0 + MINUTE
    )
    stated = msgspec.structs.replace(cheaper, currency="E" * 500)  # whoever wrote the report
    changed = life(reading(life, "fb", offer=stated, previous_offer=kettle), T0 + MINUTE)[-1]
    assert isinstance(changed, ChangeDetected)
    assert changed.offer is not None
    assert changed.offer.kinds == (OfferChangeKind.PRICE_CHANGED,)
    assert changed.offer.current == msgspec.structs.replace(cheaper, currency="E" * 60)


@pytest.mark.parametrize(
    "named",
    [
        {"key": content_key("d" * 64, RetentionClass.REFERENCED_ARCHIVE), "sha256": "d" * 64},
        {"key": content_key("e" * 64, RetentionClass.CACHE_7D), "sha256": "d" * 64},
        {
            "key": content_key("d" * 64, RetentionClass.CACHE_7D),
            "sha256": "d" * 64,
            "content_type": "text/html",
        },
    ],
    ids=["kept for ever", "another object", "no image"],
)
def test_a_difference_image_no_check_read_stores_is_not_pointed_at(named):
    life = Lifecycle()
    life(create(VISUAL))
    rendered(life, "a", T0)
    life(reading(life, "pa", visual=VisualDifference(ratio=1.0, threshold=0.05)), T0)
    rendered(life, "b", T0 + MINUTE)
    named_image = msgspec.structs.replace(screenshot("d"), **named)
    reported = VisualDifference(ratio=0.5, threshold=0.05, difference=named_image)
    change = life(reading(life, "pb", visual=reported), T0 + MINUTE)[-1]
    assert isinstance(change, ChangeDetected)
    assert change.visual == VisualDifference(ratio=0.5, threshold=0.05)
    assert consequences_of(life.state, [change], POLICY).references == []
