"""Politeness and robots.txt rules: the rate a host sees, and what a robots.txt answer means."""

from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.lifecycle.outcomes import local_failure
from schemas.enums import PolicyClass
from streams.fetch.http import FetchResult
from streams.fetch.politeness import next_start_at
from streams.fetch.robots import Verdict, rules_of
from streams.settings import SettingsError, load_settings

WANTED = st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), min_size=1, max_size=60)


def started(wanted: list[float], requests_per_s: float) -> list[float]:
    """When each request starts if it is wanted at the given moments, one after the other."""
    starts: deque[float] = deque()
    now = 0.0
    for at in sorted(wanted):
        now = next_start_at(starts, max(now, at), requests_per_s)
        starts.append(now)
    return list(starts)


@given(WANTED, st.integers(min_value=1, max_value=50))
def test_no_more_than_the_rate_start_in_any_second(wanted: list[float], requests_per_s: int):
    starts = started(wanted, requests_per_s)
    for first in starts:
        assert sum(1 for at in starts if first <= at < first + 1.0) <= requests_per_s


@given(WANTED, st.floats(min_value=0.01, max_value=50, allow_nan=False))
def test_a_fractional_rate_is_never_exceeded_over_its_window(wanted: list[float], requests_per_s: float):
    starts = started(wanted, requests_per_s)
    burst = max(1, int(requests_per_s))
    window = burst / requests_per_s
    for first in starts:
        assert sum(1 for at in starts if first <= at < first + window * (1 - 1e-9)) <= burst


@given(WANTED)
def test_without_a_rate_every_request_starts_when_wanted(wanted: list[float]):
    assert started(wanted, 0) == sorted(wanted)


def robots_answer(status: int | None, body: bytes = b"", code: str = "CONNECTION_FAILED") -> FetchResult:
    if status is None:
        outcome, failure = local_failure(code)
        return FetchResult(outcome=outcome, failure=failure)
    return FetchResult(outcome=outcome_of(status), failure=None, http_status=status, body=body)


def outcome_of(status: int):  # type: ignore[no-untyped-def]
    from schemas.enums import AttemptOutcome

    return AttemptOutcome.FETCHED if status < 400 else AttemptOutcome.HTTP_ERROR


def test_a_robots_txt_is_obeyed_with_its_wildcards_and_longest_match():
    body = b"User-agent: *\nDisallow: /private\nAllow: /private/open\nDisallow: /*.pdf$\n"
    rules = rules_of(robots_answer(200, body), now=0)
    assert rules.verdict("https://a.example/private/x") is Verdict.DISALLOWED
    assert rules.verdict("https://a.example/private/open/x") is Verdict.ALLOWED
    assert rules.verdict("https://a.example/doc.pdf") is Verdict.DISALLOWED
    assert rules.verdict("https://a.example/doc.pdfx") is Verdict.ALLOWED


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410])
def test_a_missing_robots_txt_allows_everything(status: int):
    assert rules_of(robots_answer(status), now=0).verdict("https://a.example/x") is Verdict.ALLOWED


@pytest.mark.parametrize("status", [429, 500, 503, None])
def test_an_unreadable_robots_txt_leaves_the_rules_unknown_for_a_while(status: int | None):
    rules = rules_of(robots_answer(status), now=100)
    assert rules.verdict("https://a.example/x") is Verdict.UNAVAILABLE
    assert 100 < rules.until < 100 + 3_600


@given(st.binary(max_size=2_000))
def test_any_robots_txt_body_parses_to_a_verdict(body: bytes):
    assert rules_of(robots_answer(200, body), now=0).verdict("https://a.example/x") in set(Verdict)


def test_a_policy_class_given_in_part_keeps_the_rest_of_its_defaults():
    settings = load_settings(policy_classes={"LARGE": {"max_body_bytes": 5}})
    assert settings.policy_classes[PolicyClass.LARGE].max_body_bytes == 5
    assert settings.policy_classes[PolicyClass.LARGE].max_decoded_bytes == 200 * 1024 * 1024
    assert settings.policy_classes[PolicyClass.STRICT].obey_robots


@pytest.mark.parametrize(
    "classes",
    [{"HUGE": {}}, {"LARGE": {"max_body_bytes": 0}}, {"STRICT": {"obey": True}}, {"LARGE": []}],
)
def test_an_unusable_policy_class_is_refused_at_start(classes: object):
    with pytest.raises(SettingsError, match="SCRAPESTREAM_POLICY_CLASSES"):
        load_settings(policy_classes=classes)
