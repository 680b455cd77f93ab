"""The fetch wait follows the traffic: short while records flow, long once the consumer idles."""

from __future__ import annotations

from types import SimpleNamespace

from streams.broker.compat import EMBEDDED_TANSU, IDLE_AFTER_S, FetchPacer


def pacer_at(times: list[float]) -> tuple[FetchPacer, SimpleNamespace]:
    fetcher = SimpleNamespace(_fetch_max_wait_ms=EMBEDDED_TANSU.fetch_max_wait_ms)
    clock = iter(times)
    return FetchPacer(SimpleNamespace(_fetcher=fetcher), EMBEDDED_TANSU, lambda: next(clock)), fetcher  # type: ignore[arg-type]


def test_empty_polls_for_longer_than_the_idle_threshold_lengthen_the_wait() -> None:
    pacer, fetcher = pacer_at([0.0, 0.5, IDLE_AFTER_S + 0.1])
    pacer.observed(0)
    pacer.observed(0)
    assert fetcher._fetch_max_wait_ms == EMBEDDED_TANSU.fetch_max_wait_ms
    pacer.observed(0)
    assert fetcher._fetch_max_wait_ms == EMBEDDED_TANSU.idle_fetch_max_wait_ms


def test_the_first_records_after_idleness_shorten_the_wait_again() -> None:
    pacer, fetcher = pacer_at([0.0, IDLE_AFTER_S + 1, IDLE_AFTER_S + 2, IDLE_AFTER_S + 3])
    pacer.observed(0)
    pacer.observed(0)
    pacer.observed(3)
    assert fetcher._fetch_max_wait_ms == EMBEDDED_TANSU.fetch_max_wait_ms
    pacer.observed(0)  # a single empty poll after records is not idleness yet
    assert fetcher._fetch_max_wait_ms == EMBEDDED_TANSU.fetch_max_wait_ms


def test_a_consumer_that_has_not_started_is_left_alone() -> None:
    pacer = FetchPacer(SimpleNamespace(_fetcher=None), EMBEDDED_TANSU)  # type: ignore[arg-type]
    pacer.observed(0)
    pacer.observed(5)
