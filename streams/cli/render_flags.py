"""What `submit`'s flags ask for, shared by one submission and a file of them."""

from __future__ import annotations

import argparse
from typing import Any

from schemas.records import RenderOptions


def render_options_of(arguments: argparse.Namespace) -> RenderOptions | None:
    """Render options only when a rendering flag is given."""
    width, height = arguments.viewport or (None, None)
    given = {
        "wait_until": arguments.wait_until,
        "wait_selector": arguments.wait_selector,
        "viewport_width": width,
        "viewport_height": height,
        "full_page": arguments.full_page or None,
    }
    rendering = given_fields(given)
    return RenderOptions(**rendering) if rendering else None


def given_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields a flag set (left out: those left to their default)."""
    return {name: value for name, value in fields.items() if value is not None}
