"""What a check saw of a page, reduced to what a reader sees, and how two readings differ.

HTML is compared on its visible text (scripts, styles and hidden parts left out; a monitor may
ignore parts by CSS selector, or watch only some); other text as it is; anything else by its
bytes. Every step is bounded, whatever the page: the bytes parsed, the lines and their length
compared, and the diff written.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice

from selectolax.lexbor import LexborHTMLParser, SelectolaxError

MAX_PARSED_BYTES = 2 * 2**20
MAX_LINES = 4_000
MAX_LINE_CHARS = 500
MAX_DIFF_CHARS = 32_768
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
    less what `ignore` selects."""

    watch: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Reading:
    """A page as compared: the fingerprint of its normalized content and, for text, that text."""

    fingerprint: str
    text: str | None
    size_bytes: int


@dataclass(frozen=True, slots=True)
class Diff:
    """A unified diff of two readings' text, cut at `MAX_DIFF_CHARS` (`truncated` then)."""

    text: str
    added: int
    removed: int
    truncated: bool


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


def reading_of(body: bytes, content_type: str, focus: Focus = Focus()) -> Reading:
    """The reading of a page's body, by its content type."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind in ("text/html", "application/xhtml+xml"):
        text = visible_text(body[:MAX_PARSED_BYTES], focus)
    elif is_text(kind):
        text = _bounded_lines(body[:MAX_PARSED_BYTES].decode("utf-8", "replace").splitlines())
    else:
        return Reading(hashlib.sha256(body).hexdigest(), None, len(body))
    return Reading(hashlib.sha256(text.encode()).hexdigest(), text, len(body))


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


def text_diff(before: str, after: str) -> Diff:
    """A unified diff of two texts of at most `MAX_LINES` lines each, cut at `MAX_DIFF_CHARS`."""
    old, new = before.splitlines()[:MAX_LINES], after.splitlines()[:MAX_LINES]
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
    return Diff("\n".join(written), added, removed, truncated)


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
