"""How two screenshots differ: the share of pixels that changed, and an image that marks them.

A pixel counts as changed when one of its channels moved by more than `TOLERANCE` (anti-aliasing
and image compression move them less); where the screenshots' sizes differ, the pixels only one of
them covers have changed too. The difference image is the later screenshot, faded, with the changed
pixels in red.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from PIL import Image, ImageChops, UnidentifiedImageError

from projections.monitors.unreadable import UnreadableContentError

MAX_IMAGE_BYTES = 16 * 2**20
MAX_PIXELS = 16_000_000  # a full page 1,280 pixels wide and 12,500 high
TOLERANCE = 32
CHANGED_MARK = (220, 20, 60)
FADE = 0.75


@dataclass(frozen=True, slots=True)
class Comparison:
    """The share of pixels that changed (0 to 1) and the PNG that marks them."""

    ratio: float
    difference: bytes


def screenshot_comparison(before: bytes, after: bytes) -> Comparison:
    """How `after` differs from `before`, both PNG; UnreadableContentError for anything else, or
    an image over `MAX_PIXELS`."""
    old, new = _image(before), _image(after)
    width, height = max(old.width, new.width), max(old.height, new.height)
    old_canvas, new_canvas = _canvas(old, width, height), _canvas(new, width, height)
    moved = ImageChops.difference(old_canvas, new_canvas).split()
    most = ImageChops.lighter(ImageChops.lighter(moved[0], moved[1]), moved[2])
    changed = most.point(lambda value: 255 if value > TOLERANCE else 0)
    overlap_width, overlap_height = min(old.width, new.width), min(old.height, new.height)
    changed.paste(255, (overlap_width, 0, width, height))
    changed.paste(255, (0, overlap_height, width, height))
    ratio = changed.histogram()[255] / (width * height)
    faded = Image.blend(new_canvas, Image.new("RGB", (width, height), "white"), FADE)
    marked = Image.composite(Image.new("RGB", (width, height), CHANGED_MARK), faded, changed)
    out = io.BytesIO()
    marked.save(out, "PNG", compress_level=6)
    return Comparison(ratio, out.getvalue())


def _image(body: bytes) -> Image.Image:
    if len(body) > MAX_IMAGE_BYTES:
        raise UnreadableContentError(f"a screenshot over {MAX_IMAGE_BYTES // 2**20} MiB is not compared")
    try:
        image = Image.open(io.BytesIO(body), formats=["PNG"])
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise UnreadableContentError(f"the screenshot is no readable PNG: {str(exc)[:120]}") from exc
    if image.width * image.height > MAX_PIXELS:  # known from the header, before any pixel is decoded
        raise UnreadableContentError(f"a screenshot over {MAX_PIXELS:,} pixels is not compared")
    try:
        return image.convert("RGB")
    except (OSError, ValueError) as exc:  # a truncated or corrupt image stream
        raise UnreadableContentError(f"the screenshot is no readable PNG: {str(exc)[:120]}") from exc


def _canvas(image: Image.Image, width: int, height: int) -> Image.Image:
    if image.size == (width, height):
        return image
    canvas = Image.new("RGB", (width, height), "white")
    canvas.paste(image, (0, 0))
    return canvas
