"""What a check saw of a page, reduced to what a reader sees, and how two readings differ.

HTML is compared on its visible text (scripts, styles and hidden parts left out; a monitor may ignore parts
by CSS selector, or watch only some, or compare a product page's offer alone); a JSON document by a
selection of it; a PDF by its text; other
text as it is; anything else by its bytes. A monitor may drop lines by pattern and compare without
case and whitespace. Every step is bounded, whatever the page: the bytes parsed, the lines and their
length compared, and the diffs written.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice

from selectolax.lexbor import LexborHTMLParser, SelectolaxError

from projections.monitors.documents import PDF, pdf_lines
from projections.monitors.offers import offer_lines, page_offer
from projections.monitors.patterns import Patterns, compiled
from projections.monitors.selection import selected_lines
from schemas.records import Offer

MAX_PARSED_BYTES = 2 * 2**20
MAX_DOCUMENT_BYTES = 16 * 2**20  # a PDF is read whole: its index is at its end
MAX_LINES = 4_000
MAX_LINE_CHARS = 500
MAX_DIFF_CHARS = 32_768
MAX_WORD_DIFF_TOKENS = 4_000
MAX_SELECTORS = 20
MAX_SELECTOR_CHARS = 200
HIDDEN = "script, style, noscript, template, head, iframe, object, [hidden], [aria-hidden=true]"
# Elements that end a line of visible text; inline ones (a, b, span...) run on.
BLOCKS = (
    "address, article, aside, blockquote, br, dd, details, div, dl, dt, fieldset, figcaption, figure, "
    "footer, form, h1, h2, h3, h4, h5, h6, header, hr, li, main, nav, ol, p, pre, section, summary, "
    "table, td, th, tr, ul, option, caption"
)
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml", "application/rss+xml")
_SPACES = re.compile(r"[ \t\f\v\u00a0\u200b]+")
_TOKENS = re.compile(r"\w+|\s+|[^\w\s]")
_MARKED = re.compile(r"\[-(.*?)-\]|\{\+(.*?)\+\}", re.DOTALL)
# Block elements an HTML parser checks the whole stack of open elements for as each opens: nested
# deep, they make parsing quadratic (200,000 `<div>`s take two minutes), so a page is read only
# to where they nest `MAX_DEPTH` deep.
_NESTING = re.compile(
    rb"<(/?)(?:address|article|aside|blockquote|center|details|dialog|dir|div|dl|fieldset|figcaption|"
    rb"figure|footer|header|hgroup|listing|main|menu|nav|ol|pre|search|section|summary|ul)[\s/>]",
    re.IGNORECASE,
)
MAX_DEPTH = 2_000


@dataclass(frozen=True, slots=True)
class Focus:
    """What of a page a monitor compares: only what `watch` selects (the whole page when empty),
    less what `ignore` selects; of a JSON document what `select` selects; less the lines `drop`
    matches; without case and whitespace when `insensitive`; of a product page its offer when `product`."""

    watch: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    select: str | None = None
    drop: tuple[str, ...] = ()
    insensitive: bool = False
    product: bool = False


@dataclass(frozen=True, slots=True)
class Reading:
    """A page as compared: the fingerprint of its normalized content and, for text, that text (and for a
    product page, its offer)."""

    fingerprint: str
    text: str | None
    size_bytes: int
    offer: Offer | None = None


@dataclass(frozen=True, slots=True)
class Diff:
    """A unified diff of two readings' text, cut at `MAX_DIFF_CHARS` (`truncated` then); beside it the
    changed lines by word (`[-removed-]{+added+}`), and whether a changed line matched a trigger."""

    text: str
    added: int
    removed: int
    truncated: bool
    words: str = ""
    triggered: bool = True


def focus_problem(focus: Focus) -> str | None:
    """Why a monitor's selectors cannot be used, or None."""
    selectors = (*focus.watch, *focus.ignore)
    if len(selectors) > MAX_SELECTORS:
        return f"at most {MAX_SELECTORS} selectors"
    for selector in selectors:
        if not selector.strip() or len(selector) > MAX_SELECTOR_CHARS:
            return f"a selector has 1 to {MAX_SELECTOR_CHARS} characters"
        try:
            LexborHTMLParser("<p></p>").css(selector)
        except (SelectolaxError, ValueError) as exc:
            return f"not a CSS selector: {selector[:80]!r} ({str(exc)[:120]})"
    return None


def is_text(content_type: str) -> bool:
    """Whether a body of this type is read as text; anything else is compared by its bytes' hash."""
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind.startswith(TEXT_TYPES) or kind.endswith("+json")


def read_limit(content_type: str, size_bytes: int) -> int | None:
    """How much of a stored body of this type and size a reading takes; None when it is compared by
    its stored hash alone (not text, or a PDF too large to read whole)."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == PDF:
        return MAX_DOCUMENT_BYTES if size_bytes <= MAX_DOCUMENT_BYTES else None
    return MAX_PARSED_BYTES if is_text(kind) else None


def reading_of(body: bytes, content_type: str, focus: Focus = Focus()) -> Reading:
    """The reading of a page's body, by its content type; `UnreadableContentError` when the
    monitor's options cannot read it."""
    kind = content_type.split(";", 1)[0].strip().lower()
    offer = None
    if kind == PDF and len(body) <= MAX_DOCUMENT_BYTES:
        text = _bounded_lines(pdf_lines(body))
    elif not is_text(kind):
        return Reading(hashlib.sha256(body).hexdigest(), None, len(body))
    elif focus.product:
        offer = page_offer(body[:MAX_PARSED_BYTES])
        text = "\n".join(offer_lines(offer))
    elif focus.select is not None:
        text = _bounded_lines(
            selected_lines(body[:MAX_PARSED_BYTES].decode("utf-8", "replace"), focus.select)
        )
    elif kind in ("text/html", "application/xhtml+xml"):
        text = visible_text(body[:MAX_PARSED_BYTES], focus)
    else:
        text = _bounded_lines(body[:MAX_PARSED_BYTES].decode("utf-8", "replace").splitlines())
    if focus.drop:
        dropping = compiled(focus.drop, focus.insensitive)
        text = "\n".join(line for line in text.splitlines() if not dropping.any_in((line,)))
    compared = "\n".join(_folded(line) for line in text.splitlines()) if focus.insensitive else text
    return Reading(hashlib.sha256(compared.encode()).hexdigest(), text, len(body), offer)


def visible_text(html: bytes, focus: Focus = Focus()) -> str:
    """The text a reader sees, a line per block, spaces collapsed, empty lines dropped."""
    tree = LexborHTMLParser(_shallow(html))
    for selector in (HIDDEN, *focus.ignore):
        for node in tree.css(selector):
            node.decompose()
    for node in tree.css(BLOCKS):
        node.insert_after("\n")
    roots = [node for selector in focus.watch for node in tree.css(selector)] if focus.watch else [tree.body]
    lines = (
        line for root in roots if root is not None for line in (root.text(separator="") or "").splitlines()
    )
    return _bounded_lines(lines)


def text_diff(
    before: str, after: str, *, insensitive: bool = False, triggers: Patterns | None = None
) -> Diff:
    """A unified diff of two texts of at most `MAX_LINES` lines each, cut at `MAX_DIFF_CHARS`, with
    the word diff of its changed lines; lines equal but for case and spaces are equal when
    `insensitive`, and with `triggers` the diff says whether a changed line matched one."""
    old, new = _lines(before, insensitive), _lines(after, insensitive)
    opcodes = [
        op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if op[0] != "equal"
    ]
    changed = (line for _, i1, i2, j1, j2 in opcodes for line in (*old[i1:i2], *new[j1:j2]))
    triggered = True if triggers is None or not triggers else triggers.any_in(str(line) for line in changed)
    words = _word_diff(old, new, opcodes)
    lines = difflib.unified_diff(old, new, "before", "after", lineterm="", n=2)
    written = list(islice(lines, 2))  # the two file lines, when there is a difference at all
    added, removed, truncated = 0, 0, False
    size = sum(len(line) + 1 for line in written)
    for line in lines:
        added += line.startswith("+")
        removed += line.startswith("-")
        if size + len(line) + 1 > MAX_DIFF_CHARS:
            truncated = True
            continue
        written.append(line)
        size += len(line) + 1
    return Diff("\n".join(written), added, removed, truncated, words, triggered)


class _Line(str):
    """A line that equals another when both are the same but for case and spaces."""

    __slots__ = ("key",)
    key: str

    def __new__(cls, line: str) -> _Line:
        made = super().__new__(cls, line)
        made.key = _folded(line)
        return made

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Line) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


def _folded(line: str) -> str:
    return "".join(line.casefold().split())


def _lines(text: str, insensitive: bool) -> list[str]:
    lines = text.splitlines()[:MAX_LINES]
    return [_Line(line) for line in lines] if insensitive else lines


def _word_diff(old: list[str], new: list[str], opcodes: Sequence[tuple[str, int, int, int, int]]) -> str:
    """Each changed run of lines by word, a paragraph each, cut at `MAX_DIFF_CHARS`."""
    written: list[str] = []
    size = 0
    for _, i1, i2, j1, j2 in opcodes:
        paragraph = _words_changed("\n".join(old[i1:i2]), "\n".join(new[j1:j2]))
        if size + len(paragraph) + 1 > MAX_DIFF_CHARS:
            break
        written.append(paragraph)
        size += len(paragraph) + 1
    return "\n".join(written)


def _words_changed(before: str, after: str) -> str:
    old, new = _TOKENS.findall(before), _TOKENS.findall(after)
    if len(old) + len(new) > MAX_WORD_DIFF_TOKENS:  # past this, matching words costs more than it shows
        return "".join(part for part in (_marked("-", before), _marked("+", after)) if part)
    runs: list[tuple[str, str, str]] = []  # (tag, old text, new text)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        removed, added = "".join(old[i1:i2]), "".join(new[j1:j2])
        if tag == "equal" or not runs or runs[-1][0] == "equal":
            runs.append((tag, removed, added))
            continue
        runs[-1] = ("replace", runs[-1][1] + removed, runs[-1][2] + added)
    # Words changed on both sides of a space read as one change: the space joins them.
    merged: list[tuple[str, str, str]] = []
    for index, run in enumerate(runs):
        between = 0 < index < len(runs) - 1 and run[0] == "equal" and not run[1].strip()
        if (between or run[0] != "equal") and merged and merged[-1][0] != "equal":
            merged[-1] = ("replace", merged[-1][1] + run[1], merged[-1][2] + run[2])
        else:
            merged.append(run)
    return "".join(
        removed if tag == "equal" else _marked("-", removed) + _marked("+", added)
        for tag, removed, added in merged
    )


def word_runs(words: str) -> list[tuple[str, str]]:
    """A word diff as runs of (`""`, `"-"` or `"+"`, text), for those who show it marked up."""
    runs: list[tuple[str, str]] = []
    last = 0
    for match in _MARKED.finditer(words):
        if match.start() > last:
            runs.append(("", words[last : match.start()]))
        removed, added = match.group(1), match.group(2)
        runs.append(("-", removed) if removed is not None else ("+", added))
        last = match.end()
    if last < len(words):
        runs.append(("", words[last:]))
    return runs


def _marked(sign: str, text: str) -> str:
    if not text:
        return ""
    return f"[-{text}-]" if sign == "-" else f"{{+{text}+}}"


def _shallow(html: bytes) -> bytes:
    depth = 0
    for match in _NESTING.finditer(html):
        depth = max(depth - 1, 0) if match.group(1) else depth + 1
        if depth > MAX_DEPTH:
            return html[: match.start()]
    return html


def _bounded_lines(lines: Iterable[str]) -> str:
    kept = (_SPACES.sub(" ", line).strip()[:MAX_LINE_CHARS] for line in lines)
    return "\n".join(islice((line for line in kept if line), MAX_LINES))
