"""Two screenshots compared by their pixels: the share that changed and the image that marks them."""

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw

from projections.monitors.unreadable import UnreadableContentError
from projections.monitors.visual import CHANGED_MARK, MAX_PIXELS, TOLERANCE, screenshot_comparison


def png(
    size: tuple[int, int] = (200, 100), box: tuple[int, int, int, int] | None = None, shade: int = 0
) -> bytes:
    image = Image.new("RGB", size, "white")
    if box is not None:
        ImageDraw.Draw(image).rectangle(box, fill=(shade, shade, shade))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def test_the_same_screenshot_has_not_changed():
    assert screenshot_comparison(png(box=(10, 10, 19, 19)), png(box=(10, 10, 19, 19))).ratio == 0


def test_the_share_of_changed_pixels_is_counted_and_marked():
    comparison = screenshot_comparison(png(), png(box=(0, 0, 19, 9)))  # 200 of 20,000 pixels
    assert comparison.ratio == pytest.approx(0.01)
    marked = Image.open(io.BytesIO(comparison.difference))
    assert marked.format == "PNG"
    assert marked.size == (200, 100)
    assert marked.getpixel((5, 5)) == CHANGED_MARK
    assert marked.getpixel((100, 50)) != CHANGED_MARK


def test_a_shade_within_the_tolerance_is_no_change():
    assert screenshot_comparison(png(), png(box=(0, 0, 99, 99), shade=255 - TOLERANCE)).ratio == 0
    assert screenshot_comparison(png(), png(box=(0, 0, 99, 99), shade=255 - TOLERANCE - 1)).ratio == 0.5


def test_a_page_that_grew_changed_where_only_one_screenshot_reaches():
    comparison = screenshot_comparison(png((200, 100)), png((200, 150)))
    assert comparison.ratio == pytest.approx(50 / 150)
    assert Image.open(io.BytesIO(comparison.difference)).size == (200, 150)


@settings(max_examples=25, deadline=None)
@given(
    st.tuples(st.integers(0, 199), st.integers(0, 99)),
    st.tuples(st.integers(1, 60), st.integers(1, 60)),
)
def test_the_ratio_is_the_share_of_the_area_that_changed(corner, extent):
    left, top = corner
    right, bottom = min(left + extent[0], 200) - 1, min(top + extent[1], 100) - 1
    comparison = screenshot_comparison(png(), png(box=(left, top, right, bottom)))
    assert comparison.ratio == pytest.approx((right - left + 1) * (bottom - top + 1) / 20_000)
    assert screenshot_comparison(png(box=(left, top, right, bottom)), png()).ratio == comparison.ratio


@pytest.mark.parametrize(
    "body",
    [b"<html>a page</html>", png()[:200], b"GIF89a" + bytes(100), b""],
    ids=["html", "truncated", "another format", "nothing"],
)
def test_what_is_no_readable_png_says_so(body):
    with pytest.raises(UnreadableContentError, match="no readable PNG"):
        screenshot_comparison(png(), body)


def test_a_screenshot_over_the_pixel_bound_is_refused_before_it_is_decoded():
    side = int(MAX_PIXELS**0.5) + 10
    with pytest.raises(UnreadableContentError, match="pixels is not compared"):
        screenshot_comparison(png(), png((side, side)))
