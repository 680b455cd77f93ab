import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.monitors.changes import Seen, change_of
from projections.monitors.content import (
    MAX_DIFF_CHARS,
    MAX_LINE_CHARS,
    MAX_LINES,
    Focus,
    focus_problem,
    reading_of,
    text_diff,
    visible_text,
)
from schemas.enums import ChangeKind

PAGE = b"""<html><head><title>Shop</title><style>p { color: red }</style><script>var seen = 1</script></head>
<body><div class="ad">Buy <b>now</b>!</div><h1>Price</h1><p>Only <b>12</b>&nbsp;EUR   today</p>
<ul><li>red</li><li>blue</li></ul><div hidden>secret</div><noscript>enable scripts</noscript>
<footer>Rendered at <span class="clock">10:00:01</span></footer></body></html>"""


def page(price: str, clock: str = "10:00:01", ad: str = "now") -> bytes:
    return (
        PAGE.replace(b"12", price.encode()).replace(b"10:00:01", clock.encode()).replace(b"now", ad.encode())
    )


def test_the_visible_text_is_a_line_per_block_without_what_a_reader_does_not_see():
    assert visible_text(PAGE) == "Buy now!\nPrice\nOnly 12 EUR today\nred\nblue\nRendered at 10:00:01"


def test_ignored_and_watched_parts_decide_what_is_compared():
    ignoring = Focus(ignore=(".clock", ".ad"))

    def fingerprint(body: bytes) -> str:
        return reading_of(body, "text/html", ignoring).fingerprint

    assert fingerprint(page("12", "11:59:59", "later")) == fingerprint(page("12"))
    assert fingerprint(page("13")) != fingerprint(page("12"))
    watching = Focus(watch=("h1", "p"))
    assert visible_text(page("13", "11:00:00"), watching) == "Price\nOnly 13 EUR today"


def test_text_is_compared_as_it_is_and_anything_else_by_its_bytes():
    assert reading_of(b"a  b\r\n\r\nc", "text/plain; charset=utf-8").text == "a b\nc"
    assert reading_of(b'{"price": 12}', "application/problem+json").text == '{"price": 12}'
    image = reading_of(b"\x89PNG\r\n\x1a\n" + bytes(100), "image/png")
    assert image.text is None
    assert image.size_bytes == 108
    assert image.fingerprint != reading_of(b"\x89PNG\r\n\x1a\n" + bytes(101), "image/png").fingerprint


def test_a_diff_shows_the_changed_lines_with_their_neighbours():
    before, after = visible_text(page("12")), visible_text(page("13"))
    diff = text_diff(before, after)
    assert (diff.added, diff.removed, diff.truncated) == (1, 1, False)
    assert "-Only 12 EUR today\n+Only 13 EUR today" in diff.text
    assert diff.text.startswith("--- before\n+++ after\n@@ ")


@pytest.mark.parametrize("selector", ["p[[[!", "a >> b", "", " ", "div:nth-child(", "x" * 201, "#"])
def test_a_selector_that_cannot_be_used_says_why(selector):
    assert focus_problem(Focus(ignore=(selector,))) is not None


def test_too_many_selectors_are_refused_and_usable_ones_pass():
    assert focus_problem(Focus(watch=("main article > p:first-child",), ignore=(".ad", "[data-ts]"))) is None
    assert focus_problem(Focus(ignore=tuple(f".c{n}" for n in range(21)))) == "at most 20 selectors"


@pytest.mark.parametrize(
    "body",
    [
        b"<div>" * 400_000,  # nesting that makes an HTML parser quadratic
        b"<p>" + b"x" * (8 * 2**20),  # one endless line
        b"<p>line</p>" * 200_000,  # endless lines
        bytes(range(256)) * 20_000,  # binary, declared HTML
        b"\xff\xfe<\x00p\x00>" * 100_000,  # UTF-16 by its mark, or not
    ],
)
def test_a_hostile_page_reads_to_bounded_text(body):
    text = reading_of(body, "text/html").text
    assert text is not None
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES
    assert all(len(line) <= MAX_LINE_CHARS for line in lines)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000), st.text(max_size=3000))
def test_any_diff_is_bounded_and_counts_its_lines(before, after):
    diff = text_diff(before, after)
    assert len(diff.text) <= MAX_DIFF_CHARS
    if not diff.truncated:
        body = diff.text.splitlines()[2:]
        assert diff.added == sum(1 for line in body if line.startswith("+"))
        assert diff.removed == sum(1 for line in body if line.startswith("-"))


def test_lines_that_start_like_a_diffs_file_lines_are_counted_as_changes():
    diff = text_diff("keep\n--- gone\n", "keep\n+++ came\n++ also\n")
    assert (diff.added, diff.removed) == (2, 1)


def test_the_largest_texts_make_a_diff_cut_at_its_bound():
    before = "\n".join(f"line {n}" for n in range(MAX_LINES * 2))
    after = "\n".join(f"other {n}" for n in range(MAX_LINES * 2))
    diff = text_diff(before, after)
    assert diff.truncated
    assert len(diff.text) <= MAX_DIFF_CHARS
    assert (diff.added, diff.removed) == (MAX_LINES, MAX_LINES)


def test_a_page_that_changes_goes_away_and_comes_back():
    first, second = reading_of(page("12"), "text/html"), reading_of(page("13"), "text/html")
    seen = Seen()
    steps = [
        (200, first),
        (200, first),
        (304, None),
        (200, second),
        (503, None),
        (404, None),
        (410, None),
        (200, second),
        (200, second),
    ]
    kinds = []
    for status, reading in steps:
        kind, seen = change_of(seen, status, None if reading is None else reading.fingerprint)
        kinds.append(kind)
    assert kinds == [
        ChangeKind.NEW,
        None,
        None,
        ChangeKind.CHANGED,
        None,
        ChangeKind.REMOVED,
        None,
        ChangeKind.RESTORED,
        None,
    ]


def test_a_page_gone_from_the_first_check_is_new_when_it_appears():
    kind, seen = change_of(Seen(), 404, None)
    assert kind is None
    assert seen.gone
    assert change_of(seen, 200, reading_of(b"hello", "text/plain").fingerprint)[0] is ChangeKind.NEW
