"""`scrapestream submit`'s flags become the submission's fields."""

import pytest

from schemas.enums import CacheMode, CaptureMode, PolicyClass, TransportPolicy
from schemas.records import RenderOptions
from streams.cli.kafka import submission_of
from streams.cli.main import _parser


def test_without_rendering_flags_the_submission_has_the_defaults_and_no_render_options():
    command = submission_of(_parser().parse_args(["submit", "https://example.com/"]))
    assert (command.job_type, command.transport_policy, command.capture_mode) == (
        "http.fetch",
        TransportPolicy.DIRECT_ONLY,
        CaptureMode.RAW_BODY,
    )
    assert command.render is None


def test_rendering_flags_become_render_options():
    flags = [
        "submit",
        "https://example.com/",
        "--type",
        "browser.render",
        "--capture",
        "SCREENSHOT",
        "--policy-class",
        "LARGE",
        "--cache-mode",
        "BYPASS",
        "--wait-until",
        "networkidle",
        "--wait-selector",
        "#main",
        "--viewport",
        "800x600",
        "--full-page",
    ]
    command = submission_of(_parser().parse_args(flags))
    assert command.job_type == "browser.render"
    assert (command.capture_mode, command.policy_class, command.cache_mode) == (
        CaptureMode.SCREENSHOT,
        PolicyClass.LARGE,
        CacheMode.BYPASS,
    )
    assert command.render == RenderOptions(
        wait_until="networkidle",
        wait_selector="#main",
        viewport_width=800,
        viewport_height=600,
        full_page=True,
    )


@pytest.mark.parametrize("viewport", ["800", "800x", "x600", "eightxsix", "1.5x2", "1x99999999999999999999"])
def test_a_viewport_that_is_not_width_x_height_is_refused_by_the_parser(viewport, capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["submit", "https://example.com/", "--viewport", viewport])
    assert "WIDTHxHEIGHT" in capsys.readouterr().err
