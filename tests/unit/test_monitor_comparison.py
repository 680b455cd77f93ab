"""What a monitor compares beyond visible text: a JSON selection, dropped lines, case and spaces,
trigger patterns, and the word diff beside the line diff."""

from __future__ import annotations

import json
import string

import pytest
from fpdf import FPDF
from hypothesis import given
from hypothesis import strategies as st

from projections.monitors.changes import Seen, change_of
from projections.monitors.content import (
    MAX_DIFF_CHARS,
    MAX_DOCUMENT_BYTES,
    MAX_PARSED_BYTES,
    Focus,
    read_limit,
    reading_of,
    text_diff,
    word_runs,
)
from projections.monitors.patterns import MAX_PATTERN_CHARS, MAX_PATTERNS, compiled, patterns_problem
from projections.monitors.selection import select_problem, selected_lines
from projections.monitors.unreadable import UnreadableContentError
from schemas.enums import ChangeKind

API = {"product": {"name": "Kettle", "price": {"amount": 39.9, "currency": "EUR"}}, "served_at": "10:00"}


def document(**changes: object) -> bytes:
    body = json.loads(json.dumps(API))
    body["product"].update(changes)
    return json.dumps(body).encode()


def test_a_json_selection_compares_only_what_it_selects_a_line_per_path():
    focus = Focus(select="product")
    before = reading_of(document(), "application/json", focus)
    assert before.text == 'name = "Kettle"\nprice.amount = 39.9\nprice.currency = "EUR"'
    other_time = json.loads(document())
    other_time["served_at"] = "10:05"
    reordered = json.dumps(other_time, indent=4, sort_keys=True).encode()
    assert reading_of(reordered, "application/json; charset=utf-8", focus).fingerprint == before.fingerprint
    after = reading_of(document(price={"amount": 34.9, "currency": "EUR"}), "application/json", focus)
    assert after.fingerprint != before.fingerprint
    diff = text_diff(before.text or "", after.text or "")
    assert "-price.amount = 39.9\n+price.amount = 34.9" in diff.text
    assert diff.words == "price.amount = [-39-]{+34+}.9"


def test_keys_that_are_not_identifiers_are_quoted_and_empty_containers_are_leaves():
    lines = selected_lines(json.dumps({"a b": [1, {}], "c": [], "d": {"e.f": None}}), "@")
    assert lines == ['"a b"[0] = 1', '"a b"[1] = {}', "c = []", 'd."e.f" = null']


@pytest.mark.parametrize("body", ["<html>not json</html>", "[" * 100_000, '{"a": 1'])
def test_a_body_the_selection_cannot_read_says_why(body):
    with pytest.raises(UnreadableContentError):
        reading_of(body.encode(), "application/json", Focus(select="a"))


@pytest.mark.parametrize("expression", ["", "a[", "x" * 301, "foo(", "a.[?b =="])
def test_a_selection_that_is_no_jmespath_expression_is_refused(expression):
    assert select_problem(expression) is not None


def test_dropped_lines_and_case_and_spaces_never_count():
    page = b"<main><p>Price: 9 EUR</p><p>Visitors today: 120</p></main>"
    later = b"<main><p>price:  9 eur</p><p>Visitors today: 121</p></main>"
    plain = Focus(drop=("^Visitors",))
    assert reading_of(page, "text/html", plain).text == "Price: 9 EUR"
    assert (
        reading_of(page, "text/html", plain).fingerprint != reading_of(later, "text/html", plain).fingerprint
    )
    loose = Focus(drop=("^visitors",), insensitive=True)
    assert (
        reading_of(page, "text/html", loose).fingerprint == reading_of(later, "text/html", loose).fingerprint
    )
    assert text_diff("Price: 9 EUR\nA", "price:9 eur\nB", insensitive=True).text.splitlines()[2:] == [
        "@@ -1,2 +1,2 @@",
        " Price: 9 EUR",
        "-A",
        "+B",
    ]


def test_a_trigger_says_whether_a_changed_line_matches_it():
    triggers = compiled(["(?i)in stock", r"\bsold out\b"])
    assert text_diff("Kettle\nSold out", "Kettle\nIn stock", triggers=triggers).triggered
    assert text_diff("Kettle\nIn stock", "Kettle\nsold out", triggers=triggers).triggered
    assert not text_diff("Kettle\nIn stock\n10:00", "Kettle\nIn stock\n10:05", triggers=triggers).triggered
    assert text_diff("a", "b").triggered  # no trigger: every change
    assert not text_diff("IN STOCK", "in stock", triggers=compiled(["in stock"]), insensitive=True).triggered


def test_a_change_no_trigger_matched_is_known_but_not_announced():
    seen = Seen("old")
    assert change_of(seen, 200, "new", announced=False) == (None, Seen("new"))
    assert change_of(Seen(), 200, "new", announced=False) == (None, Seen("new"))
    assert change_of(Seen("old", gone=True), 200, "new", announced=False)[0] is ChangeKind.RESTORED
    assert change_of(seen, 404, None, announced=False)[0] is ChangeKind.REMOVED


def test_a_hostile_pattern_matches_in_time_linear_in_the_line():
    # With a backtracking engine this search takes longer than the suite: 2^30 ways to split the a's.
    hostile = compiled([r"(a+)+$", r"(a|aa)+b", r"(x+x+)+y"])
    assert not hostile.any_in(["a" * 30 + "!", "a" * 100_000 + "!", "x" * 5_000])


@pytest.mark.parametrize(
    ("patterns", "problem"),
    [
        ([r"(a)\1"], "not a pattern RE2 accepts"),
        ([r"(?<=a)b"], "not a pattern RE2 accepts"),
        (["a{1000}{1000}"], "not a pattern RE2 accepts"),
        (["((((((((((a{100}){100}){100})))))))))"], "not a pattern RE2 accepts"),
        ([""], "a pattern has 1 to"),
        (["a" * (MAX_PATTERN_CHARS + 1)], "a pattern has 1 to"),
        (["a"] * (MAX_PATTERNS + 1), "at most"),
    ],
)
def test_a_pattern_that_cannot_be_used_is_refused_with_why(patterns, problem):
    refused = patterns_problem("trigger", patterns)
    assert refused is not None
    assert refused.startswith("trigger: ")
    assert problem in refused


def test_usable_patterns_pass():
    assert patterns_problem("drop", [r"^\d+ visitors", "(?i)advert"]) is None


def test_the_word_diff_marks_each_changed_run_and_leaves_the_rest():
    diff = text_diff("Kettle\nPrice: 39.90 EUR\nShips in 2 days", "Kettle\nPrice: 34.90 EUR\nShips today")
    assert diff.words == "Price: [-39-]{+34+}.90 EUR\nShips [-in 2 days-]{+today+}"
    assert word_runs("a [-b-]{+c+} d") == [("", "a "), ("-", "b"), ("+", "c"), ("", " d")]
    assert text_diff("", "New page").words == "{+New page+}"


def test_the_largest_texts_make_a_word_diff_cut_at_its_bound():
    before = "\n".join(f"line {n} " + "x" * 400 for n in range(4_000))
    after = "\n".join(f"line {n} " + "y" * 400 for n in range(4_000))
    assert len(text_diff(before, after).words) <= MAX_DIFF_CHARS


_LINE = st.text(string.ascii_letters + " .,:-+0123456789", min_size=1, max_size=120)  # no [ ] { }: the marks


@given(_LINE, _LINE)
def test_a_changed_lines_word_runs_give_back_both_lines(before, after):
    runs = word_runs(text_diff(before, after).words)
    if before == after:
        assert runs == []
        return
    assert "".join(text for kind, text in runs if kind != "+") == before
    assert "".join(text for kind, text in runs if kind != "-") == after


def pdf(*lines: str, password: str | None = None) -> bytes:
    document = FPDF()
    document.add_page()
    document.set_font("helvetica", size=12)
    for line in lines:
        document.cell(text=line)
        document.ln()
    if password is not None:
        document.set_encryption(owner_password="owner", user_password=password)
    return bytes(document.output())


def test_a_pdf_is_compared_by_its_text():
    before = reading_of(pdf("Quarterly report", "Revenue: 10 million EUR"), "application/pdf")
    assert before.text == "Quarterly report\nRevenue: 10 million EUR"
    after = reading_of(pdf("Quarterly report", "Revenue: 12 million EUR"), "application/pdf")
    diff = text_diff(before.text or "", after.text or "")
    assert "-Revenue: 10 million EUR\n+Revenue: 12 million EUR" in diff.text
    assert diff.words == "Revenue: [-10-]{+12+} million EUR"


@pytest.mark.parametrize(
    "body",
    [
        b"%PDF-1.7\nnot really",
        pdf("Quarterly report")[:600],
        b"<html>an error page</html>",
        pdf("x", password="s"),
    ],
    ids=["no-document", "cut-short", "an-html-page", "password"],  # an encrypted PDF's bytes differ each run
)
def test_a_pdf_that_cannot_be_read_says_so(body):
    with pytest.raises(UnreadableContentError, match="PDF"):
        reading_of(body, "application/pdf")


def test_a_pdf_is_read_whole_up_to_its_bound_and_past_it_by_its_hash():
    assert read_limit("application/pdf", 3_000_000) == MAX_DOCUMENT_BYTES
    assert read_limit("application/pdf", MAX_DOCUMENT_BYTES + 1) is None
    assert read_limit("text/html; charset=utf-8", 50_000_000) == MAX_PARSED_BYTES
    assert read_limit("image/png", 10) is None
