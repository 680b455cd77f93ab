"""A product page's offer, as its structured data states it, and how two offers differ.

The offer is the first schema.org `Product`'s first `Offer` (or `AggregateOffer`'s lowest price) in
the page's JSON-LD, else in its microdata, read by extruct: the data a shop publishes for search
engines, which stays put when the page's layout moves.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any

from projections.monitors.unreadable import UnreadableContentError
from schemas.enums import OfferChangeKind
from schemas.records import Offer

AVAILABLE = frozenset({"InStock", "InStoreOnly", "LimitedAvailability", "OnlineOnly"})
UNAVAILABLE = frozenset({"OutOfStock", "SoldOut", "Discontinued"})
MAX_VALUE_CHARS = 60
MAX_DEPTH = 8
CENT = Decimal("0.01")
_GROUPED = re.compile(r"\d{1,3}(,\d{3})+(\.\d+)?")


def page_offer(body: bytes) -> Offer:
    """The page's product offer; UnreadableContentError when its structured data states none."""
    from extruct import extract  # imported where pages are read: it loads rdflib

    data = extract(body, syntaxes=["json-ld", "microdata"], uniform=True, errors="ignore")
    for item in [*data.get("json-ld", ()), *data.get("microdata", ())]:
        for product in _typed(item, "Product", MAX_DEPTH):
            offer = _offer(product.get("offers"))
            if offer is not None:
                return offer
    raise UnreadableContentError("the page states no schema.org Product offer (in JSON-LD or microdata)")


def offer_lines(offer: Offer) -> list[str]:
    """The offer as the lines a product monitor compares, diffs and matches triggers on."""
    price = " ".join(part for part in (offer.amount, offer.currency) if part)
    return [
        *([f"price = {price}"] if price else []),
        *([f"availability = {offer.availability}"] if offer.availability else []),
    ]


def offer_kinds(previous: Offer | None, current: Offer) -> tuple[OfferChangeKind, ...]:
    """What the change from `previous` to `current` is; none when they agree, OFFER_CHANGED from an
    offer not known (its content expired)."""
    if previous is None:
        return (OfferChangeKind.OFFER_CHANGED,)
    kinds = []
    if not _same_amount(previous.amount, current.amount) or previous.currency != current.currency:
        kinds.append(OfferChangeKind.PRICE_CHANGED)
    if previous.availability is not None and current.availability != previous.availability:
        if current.availability in AVAILABLE and previous.availability not in AVAILABLE:
            kinds.append(OfferChangeKind.BACK_IN_STOCK)
        elif current.availability in UNAVAILABLE and previous.availability not in UNAVAILABLE:
            kinds.append(OfferChangeKind.OUT_OF_STOCK)
    if not kinds and previous.availability != current.availability:
        kinds.append(OfferChangeKind.OFFER_CHANGED)
    return tuple(kinds)


def bounded(offer: Offer | None) -> Offer | None:
    """The offer with each value cut at its bound, whoever stated it."""
    if offer is None:
        return None
    return Offer(
        amount=_cut(offer.amount), currency=_cut(offer.currency), availability=_cut(offer.availability)
    )


def _cut(value: str | None) -> str | None:
    return None if value is None else value[:MAX_VALUE_CHARS]


def _typed(value: Any, name: str, depth: int) -> Iterator[dict[str, Any]]:
    """Items of schema.org type `name` in `value`, in document order, `depth` levels down at most."""
    if depth <= 0:
        return
    if isinstance(value, list):
        for item in value:
            yield from _typed(item, name, depth - 1)
    elif isinstance(value, dict):
        if name in _types(value.get("@type")):
            yield value
        yield from _typed(value.get("@graph"), name, depth - 1)


def _types(value: Any) -> set[str]:
    names = value if isinstance(value, list) else [value]
    return {_short(item) for item in names if isinstance(item, str)}


def _offer(offers: Any) -> Offer | None:
    first = next(iter(offers), None) if isinstance(offers, list) else offers
    if not isinstance(first, dict):
        return None
    specification = first.get("priceSpecification")
    if isinstance(specification, list):
        specification = next(iter(specification), None)
    specification = specification if isinstance(specification, dict) else {}
    price = _first(first, "price", "lowPrice") or _first(specification, "price")
    currency = _first(first, "priceCurrency") or _first(specification, "priceCurrency")
    availability = _first(first, "availability")
    offer = Offer(
        amount=_amount(price),
        currency=None if currency is None else currency.upper(),
        availability=None if availability is None else _short(availability),
    )
    return None if offer == Offer() else offer


def _first(item: dict[str, Any], *names: str) -> str | None:
    """The first of `names` the item states as a number or text, as bounded text."""
    for name in names:
        value = item.get(name)
        if isinstance(value, list):
            value = next(iter(value), None)
        if isinstance(value, dict):
            value = value.get("@id") or value.get("@value")
        if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str) and value.strip():
            return value.strip()[:MAX_VALUE_CHARS]
    return None


def _amount(text: str | None) -> str | None:
    """A price as an exact decimal number in text, one way whatever the page's (`34.5`, `34.50` and
    `34.500` are `34.50`, `20.00` is `20`); as stated when it is no number."""
    if text is None:
        return None
    plain = text.replace(" ", "").replace("\u00a0", "")
    if _GROUPED.fullmatch(plain):
        plain = plain.replace(",", "")
    try:
        number = Decimal(plain)
    except InvalidOperation:
        return text
    if not number.is_finite() or not -MAX_VALUE_CHARS < number.adjusted() < MAX_VALUE_CHARS:
        return text
    number = number.normalize()
    return format(number.quantize(CENT) if number.as_tuple().exponent == -1 else number, "f")


def _same_amount(before: str | None, after: str | None) -> bool:
    try:
        return before == after or (
            before is not None and after is not None and Decimal(before) == Decimal(after)
        )
    except InvalidOperation:
        return False


def _short(name: str) -> str:
    """A schema.org name without its vocabulary: `https://schema.org/InStock` is `InStock`."""
    return re.split(r"[/:#]", name.strip())[-1][:MAX_VALUE_CHARS]
