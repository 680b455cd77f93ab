"""Text from outside (a file's lines, an API's answer) as a terminal may show it: control characters
escaped, so no escape sequence in the text can move the cursor, retitle the window or hide output."""

from __future__ import annotations

CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))}


def printable(text: str) -> str:
    return text.translate(CONTROLS)
