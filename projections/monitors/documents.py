"""A PDF document's text, as a monitor compares it: its pages' text in order, a line per line."""

from __future__ import annotations

import io
import logging

from pypdf import PdfReader

from projections.monitors.unreadable import UnreadableContentError

PDF = "application/pdf"
MAX_PAGES = 500
logging.getLogger("pypdf").setLevel(logging.ERROR)  # a broken document is the check's outcome, not a warning


def pdf_lines(body: bytes) -> list[str]:
    """The text of the first `MAX_PAGES` pages, a line each."""
    try:
        reader = PdfReader(io.BytesIO(body), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableContentError("the PDF is encrypted with a password")
        return [
            line for page in reader.pages[:MAX_PAGES] for line in (page.extract_text() or "").splitlines()
        ]
    except UnreadableContentError:
        raise
    except Exception as exc:  # pypdf raises many kinds on a broken document
        raise UnreadableContentError(
            f"the PDF could not be read: {type(exc).__name__}: {str(exc)[:120]}"
        ) from exc
