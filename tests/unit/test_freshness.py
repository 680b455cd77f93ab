"""RFC 9111 for a shared cache, header by header: storing, freshness, age, validation, Vary."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.lifecycle.freshness import (
    Freshness,
    directives,
    request_allows_reuse,
    request_allows_store,
    response_freshness,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
HTTP_NOW = "Tue, 01 Dec 2026 12:00:00 GMT"


def fresh(headers: dict[str, str], status: int = 200) -> Freshness:
    return response_freshness(status, headers, NOW)


@pytest.mark.parametrize(
    "headers",
    [
        {"cache-control": "no-store"},
        {"cache-control": "private"},
        {"cache-control": 'private="set-cookie", max-age=60'},
        {"cache-control": "max-age=60, No-Store"},
        {"vary": "*"},
        {"vary": "Accept-Encoding, *", "cache-control": "max-age=60"},
    ],
)
def test_a_shared_cache_stores_none_of_these(headers):
    assert not fresh(headers).storable


def test_s_maxage_wins_over_max_age_and_expires_for_a_shared_cache():
    found = fresh({"cache-control": "max-age=600, s-maxage=60", "expires": "Wed, 02 Dec 2026 12:00:00 GMT"})
    assert found.fresh_for_ms == 60_000


def test_max_age_wins_over_expires():
    found = fresh(
        {"cache-control": "max-age=60", "expires": "Wed, 02 Dec 2026 12:00:00 GMT", "date": HTTP_NOW}
    )
    assert found.fresh_for_ms == 60_000


def test_expires_counts_from_the_responses_own_date():
    found = fresh({"expires": "Tue, 01 Dec 2026 12:10:00 GMT", "date": "Tue, 01 Dec 2026 12:00:00 GMT"})
    assert found.fresh_for_ms == 600_000


@pytest.mark.parametrize("expires", ["0", "-1", "yesterday", ""])
def test_an_invalid_expires_is_already_stale(expires):
    assert fresh({"expires": expires}).fresh_for_ms == 0


def test_age_counts_against_freshness():
    assert fresh({"cache-control": "max-age=100", "age": "30"}).fresh_for_ms == 70_000
    assert fresh({"cache-control": "max-age=100", "age": "500"}).fresh_for_ms == 0


def test_an_old_date_counts_as_age_when_it_is_older_than_the_age_header():
    date = (NOW - timedelta(seconds=40)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert fresh({"cache-control": "max-age=100", "age": "10", "date": date}).fresh_for_ms == 60_000


def test_no_cache_stores_the_response_but_every_use_is_validated():
    found = fresh({"cache-control": "no-cache, max-age=600"})
    assert found.storable
    assert found.must_revalidate
    assert fresh({"pragma": "no-cache"}).must_revalidate
    assert not fresh({"pragma": "no-cache", "cache-control": "max-age=60"}).must_revalidate


def test_an_invalid_max_age_is_stale_and_a_repeated_one_takes_the_smallest():
    assert fresh({"cache-control": "max-age=abc"}).fresh_for_ms == 0
    assert fresh({"cache-control": "max-age=600, max-age=60"}).fresh_for_ms == 60_000


def test_without_a_stated_freshness_only_heuristically_cacheable_statuses_are_stored():
    assert fresh({}, 200).storable
    assert fresh({}, 200).fresh_for_ms is None
    assert not fresh({}, 201).storable
    assert fresh({"cache-control": "public"}, 201).storable
    assert fresh({"cache-control": "max-age=60"}, 202).storable


def test_a_requests_own_directives_forbid_storing_or_unvalidated_reuse():
    assert not request_allows_store({"cache-control": "no-store"})
    assert request_allows_store({"cache-control": "max-age=0"})
    assert not request_allows_reuse({"cache-control": "no-cache"})
    assert not request_allows_reuse({"cache-control": "max-age=0"})
    assert not request_allows_reuse({"pragma": "no-cache"})
    assert request_allows_reuse({"cache-control": "max-age=60"})
    assert request_allows_reuse({})


def test_quoted_directive_values_may_hold_commas():
    assert directives('no-cache="set-cookie, x-a", max-age=5') == {
        "no-cache": "set-cookie, x-a",
        "max-age": "5",
    }


@given(st.text(max_size=200), st.text(max_size=60), st.text(max_size=60), st.text(max_size=60))
def test_any_header_values_give_an_answer_never_an_exception(control, expires, date, age):
    found = fresh({"cache-control": control, "expires": expires, "date": date, "age": age, "vary": control})
    assert found.fresh_for_ms is None or found.fresh_for_ms >= 0
