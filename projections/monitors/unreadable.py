"""The one way a monitor's reading of a body fails on what the body is."""

from __future__ import annotations


class UnreadableContentError(ValueError):
    """A body a monitor's options cannot read (not JSON for a selection, a broken PDF), in words
    its owner can act on; the check's outcome, never a retry."""
