"""A product page's offer from its structured data, and the typed change between two offers."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.monitors.content import Focus, reading_of
from projections.monitors.offers import AVAILABLE, UNAVAILABLE, bounded, offer_kinds, page_offer
from projections.monitors.unreadable import UnreadableContentError
from schemas.enums import OfferChangeKind
from schemas.records import Offer

KETTLE = Offer(amount="39.90", currency="EUR", availability="InStock")


def json_ld(*items: object) -> bytes:
    scripts = "".join(f'<script type="application/ld+json">{json.dumps(item)}</script>' for item in items)
    return f"<html><head>{scripts}</head><body><h1>Kettle</h1></body></html>".encode()


def product(offers: object, kind: object = "Product") -> dict[str, object]:
    return {"@context": "https://schema.org", "@type": kind, "name": "Kettle", "offers": offers}


OFFER = {
    "@type": "Offer",
    "price": "39.90",
    "priceCurrency": "EUR",
    "availability": "https://schema.org/InStock",
}


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        (json_ld(product(OFFER)), KETTLE),
        (json_ld(product([OFFER, OFFER | {"price": "1.00"}])), KETTLE),
        (
            json_ld({"@context": "https://schema.org", "@graph": [{"@type": "WebPage"}, product(OFFER)]}),
            KETTLE,
        ),
        (json_ld(product(OFFER, ["Product", "Thing"])), KETTLE),
        (json_ld({"@type": "BreadcrumbList"}, product(OFFER | {"price": 39.9})), KETTLE),
        (
            json_ld(product(OFFER | {"price": "1,299.00", "priceCurrency": "usd"})),
            Offer(amount="1299", currency="USD", availability="InStock"),
        ),
        (
            json_ld(product({"@type": "AggregateOffer", "lowPrice": 12, "priceCurrency": "GBP"})),
            Offer(amount="12", currency="GBP"),
        ),
        (
            json_ld(
                product({"@type": "Offer", "priceSpecification": {"price": "5.5", "priceCurrency": "EUR"}})
            ),
            Offer(amount="5.50", currency="EUR"),
        ),
        (
            json_ld(product(OFFER | {"availability": "OutOfStock"})),
            Offer(amount="39.90", currency="EUR", availability="OutOfStock"),
        ),
        (
            json_ld(product(OFFER | {"price": "Call us"})),
            Offer(amount="Call us", currency="EUR", availability="InStock"),
        ),
        (
            json_ld(product(OFFER | {"price": "9e999999"})),
            Offer(amount="9e999999", currency="EUR", availability="InStock"),
        ),
        (
            b'<div itemscope itemtype="https://schema.org/Product"><span itemprop="name">Mug</span>'
            b'<div itemprop="offers" itemscope itemtype="https://schema.org/Offer">'
            b'<span itemprop="price" content="5.00">5,00 \xe2\x82\xac</span>'
            b'<meta itemprop="priceCurrency" content="EUR">'
            b'<link itemprop="availability" href="https://schema.org/SoldOut"></div></div>',
            Offer(amount="5", currency="EUR", availability="SoldOut"),
        ),
    ],
    ids=[
        "json-ld",
        "the first of several offers",
        "in a graph",
        "typed twice",
        "after another item",
        "grouped digits",
        "aggregate offer",
        "price specification",
        "short availability",
        "no number",
        "no plausible number",
        "microdata",
    ],
)
def test_a_pages_offer_is_read_from_its_structured_data(page, expected):
    assert page_offer(page) == expected


@pytest.mark.parametrize(
    "page",
    [
        b"<html><body><p>Price: 39.90 EUR</p></body></html>",
        json_ld({"@type": "Article", "offers": OFFER}),
        json_ld(product({})),
        json_ld(product("39.90")),
        b'<script type="application/ld+json">{"@type": "Product", "offers": </script>',
        json_ld(product(OFFER | {"price": None, "priceCurrency": None, "availability": None})),
    ],
    ids=["text only", "no product", "an empty offer", "an offer as text", "broken JSON-LD", "nothing stated"],
)
def test_a_page_that_states_no_offer_says_so(page):
    with pytest.raises(UnreadableContentError, match=r"states no schema\.org Product offer"):
        page_offer(page)


def test_a_graph_nested_beyond_the_bound_is_not_searched():
    nested: dict[str, object] = product(OFFER)
    for _ in range(20):
        nested = {"@graph": [nested]}
    with pytest.raises(UnreadableContentError):
        page_offer(json_ld(nested))


def test_a_product_monitor_compares_the_offer_not_the_page():
    page = json_ld(product(OFFER))
    reading = reading_of(page, "text/html; charset=utf-8", Focus(product=True))
    assert reading.text == "price = 39.90 EUR\navailability = InStock"
    assert reading.offer == KETTLE
    moved = page.replace(b"<h1>Kettle</h1>", b"<h1>A new layout</h1><p>Visitors: 12</p>")
    assert reading_of(moved, "text/html", Focus(product=True)).fingerprint == reading.fingerprint


@pytest.mark.parametrize(
    ("previous", "current", "kinds"),
    [
        (
            KETTLE,
            Offer(amount="34.50", currency="EUR", availability="InStock"),
            [OfferChangeKind.PRICE_CHANGED],
        ),
        (
            KETTLE,
            Offer(amount="39.90", currency="USD", availability="InStock"),
            [OfferChangeKind.PRICE_CHANGED],
        ),
        (KETTLE, Offer(amount="39.9", currency="EUR", availability="InStock"), []),
        (
            KETTLE,
            Offer(amount="39.90", currency="EUR", availability="OutOfStock"),
            [OfferChangeKind.OUT_OF_STOCK],
        ),
        (
            Offer(amount="1", availability="SoldOut"),
            Offer(amount="1", availability="InStock"),
            [OfferChangeKind.BACK_IN_STOCK],
        ),
        (
            Offer(amount="1", availability="PreOrder"),
            Offer(amount="1", availability="InStock"),
            [OfferChangeKind.BACK_IN_STOCK],
        ),
        (
            Offer(amount="1", availability="OutOfStock"),
            Offer(amount="2", availability="InStock"),
            [OfferChangeKind.PRICE_CHANGED, OfferChangeKind.BACK_IN_STOCK],
        ),
        (
            Offer(amount="1", availability="PreOrder"),
            Offer(amount="1", availability="BackOrder"),
            [OfferChangeKind.OFFER_CHANGED],
        ),
        (
            Offer(amount="1", availability="OutOfStock"),
            Offer(amount="1", availability="SoldOut"),
            [OfferChangeKind.OFFER_CHANGED],
        ),
        (Offer(amount="1"), Offer(amount="1", availability="InStock"), [OfferChangeKind.OFFER_CHANGED]),
        (None, KETTLE, [OfferChangeKind.OFFER_CHANGED]),
    ],
)
def test_an_offers_change_is_typed(previous, current, kinds):
    assert list(offer_kinds(previous, current)) == kinds


availabilities = st.sampled_from(sorted(AVAILABLE | UNAVAILABLE | {"PreOrder", "BackOrder"})) | st.none()
offers = st.builds(
    Offer,
    amount=st.integers(0, 10**6).map(lambda cents: f"{cents // 100}.{cents % 100:02d}") | st.none(),
    currency=st.sampled_from(["EUR", "USD"]) | st.none(),
    availability=availabilities,
)


@given(offers)
def test_an_offer_unchanged_is_no_change(offer):
    assert offer_kinds(offer, offer) == ()


@given(offers, offers)
def test_stock_moves_one_way_at_a_time_and_a_price_change_is_seen_both_ways(before, after):
    forward, backward = offer_kinds(before, after), offer_kinds(after, before)
    assert not {OfferChangeKind.BACK_IN_STOCK, OfferChangeKind.OUT_OF_STOCK} <= set(forward)
    assert (OfferChangeKind.PRICE_CHANGED in forward) == (OfferChangeKind.PRICE_CHANGED in backward)
    if OfferChangeKind.BACK_IN_STOCK in forward:
        assert after.availability in AVAILABLE
        assert OfferChangeKind.BACK_IN_STOCK not in backward
    assert bool(forward) == (before != after)


def test_an_offer_from_a_report_is_cut_at_its_bounds():
    stated = Offer(amount="9" * 500, currency="E" * 500, availability=None)
    assert bounded(stated) == Offer(amount="9" * 60, currency="E" * 60, availability=None)
