"""Submission rules beyond the basic accept/reject table: bounds, rejections' completions, dedupe."""

from dataclasses import replace
from datetime import timedelta
from uuid import uuid4

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.lifecycle.consequences import consequences_of
from projections.lifecycle.limits import MAX_LABELS, MAX_URL_BYTES
from projections.lifecycle.policy import CredentialGrant, ExecutionProfile, Policy
from projections.lifecycle.submission import (
    MAX_VIEWPORT,
    MIN_VIEWPORT,
    WAIT_EVENTS,
    render_problem,
    runner_of,
    submission_identity,
)
from schemas.commands import CancelJob
from schemas.enums import (
    ActorRole,
    AuditOutcome,
    CacheMode,
    CaptureMode,
    HttpMethod,
    JobStatus,
    PolicyClass,
    RejectionReason,
    RetentionClass,
    TransportPolicy,
)
from schemas.events import JobAccepted
from schemas.records import RenderOptions, Request
from tests.lifecycle import ARTIFACT, POLICY, T0, Lifecycle, attempt_under, kinds, report, submit


@pytest.mark.parametrize(
    "overrides",
    [
        {"request": Request(url="https://example.com/" + "a" * MAX_URL_BYTES)},
        {"labels": {f"k{index}": "v" for index in range(MAX_LABELS + 1)}},
        {"labels": {"k": "v" * 5_000}},
        {"labels": {"k" * 500: "v"}},
        {"callback_url": "https://hooks.example/" + "a" * 5_000},
        {"caller_identity": "c" * 1_000},
        {"idempotency_key": "k" * 1_000},
    ],
)
def test_a_submission_too_large_to_carry_downstream_is_rejected_with_a_reason(overrides):
    lifecycle = Lifecycle()
    (rejected,) = lifecycle(submit(**overrides))
    assert rejected.reason is RejectionReason.INPUT_TOO_LARGE
    assert "bytes" in rejected.detail or "labels" in rejected.detail
    # What the rejection carries is cut to the bounds, so its own records stay small.
    assert len(msgspec.json.encode(rejected)) < 20_000


@pytest.mark.parametrize(
    "headers", [{"user-agent": "a\r\nx-injected: 1"}, {"user-agent": "caf\u00e9"}, {"accept": "x" * 5_000}]
)
def test_header_values_must_be_short_printable_ascii(headers):
    (rejected,) = Lifecycle()(submit(request=Request(url="https://example.com/", headers=headers)))
    assert rejected.reason is RejectionReason.DISALLOWED_HEADER


@pytest.mark.parametrize(
    "url", ["http://exa mple.com/", "http://example.com/\x00", "http://" + "a" * 64 + ".com/", "http://a..b/"]
)
def test_urls_with_control_characters_or_invalid_host_names_are_rejected(url):
    (rejected,) = Lifecycle()(submit(request=Request(url=url)))
    assert rejected.reason is RejectionReason.INVALID_URL


def test_international_host_names_are_canonicalized_to_a_labels():
    lifecycle = Lifecycle()
    lifecycle(submit(request=Request(url="https://Bücher.example/page")))
    assert lifecycle.job.accepted.request.url == "https://xn--bcher-kva.example/page"


def test_a_type_with_a_profile_is_accepted_whether_or_not_this_worker_runs_it():
    policy = Policy.from_declared(
        {"http.fetch": (30_000, 3), "pdf.render": (60_000, 2)}, ExecutionProfile(20_000, 3)
    )
    lifecycle = Lifecycle(policy=policy)
    assert kinds(lifecycle(submit(job_type="pdf.render")))[0] == "JobAccepted"  # its work waits for a runner


@pytest.mark.parametrize(
    ("job_type", "transport", "runner"),
    [
        ("http.fetch", TransportPolicy.DIRECT_ONLY, "http.fetch"),
        ("http.fetch", TransportPolicy.BROWSER, "browser.render"),
        ("browser.render", TransportPolicy.DIRECT_ONLY, "browser.render"),
        ("pdf.render", TransportPolicy.BROWSER, "pdf.render"),
    ],
)
def test_work_goes_to_the_executors_of_the_type_that_runs_it(job_type, transport, runner):
    assert runner_of(job_type, transport) == runner


def test_a_rejection_ends_in_a_rejected_completion_and_a_callback():
    lifecycle = Lifecycle()
    events = lifecycle(
        submit(
            request=Request(url="ftp://example.com/x"),
            callback_url="https://hooks.example/done",
            labels={"team": "a"},
        )
    )
    result = consequences_of(lifecycle.state, events, POLICY)
    (completion,) = result.completions
    assert completion.status is JobStatus.REJECTED
    assert completion.failure.code == "UNSUPPORTED_SCHEME"
    assert completion.url == "ftp://example.com/x"
    assert completion.labels == {"team": "a"}
    (callback,) = result.callbacks
    assert callback.completion == completion
    assert callback.callback_url == "https://hooks.example/done"


def test_a_rejection_for_a_bad_callback_url_has_no_callback():
    lifecycle = Lifecycle()
    events = lifecycle(submit(callback_url="mailto:ops@example.com"))
    result = consequences_of(lifecycle.state, events, POLICY)
    assert [c.status for c in result.completions] == [JobStatus.REJECTED]
    assert result.callbacks == []


@pytest.mark.parametrize("mode", [CaptureMode.RENDERED_HTML, CaptureMode.SCREENSHOT])
def test_a_browser_capture_mode_without_a_browser_is_rejected_with_the_reason(mode):
    lifecycle = Lifecycle()
    (rejected,) = lifecycle(submit(capture_mode=mode))
    assert rejected.reason is RejectionReason.UNSUPPORTED_CAPTURE_MODE
    assert "browser.render" in rejected.detail


@pytest.mark.parametrize("mode", [CaptureMode.RENDERED_HTML, CaptureMode.SCREENSHOT])
def test_a_browser_capture_mode_is_accepted_for_a_rendered_page(mode):
    (accepted, *_) = Lifecycle()(submit(capture_mode=mode, job_type="browser.render"))
    assert isinstance(accepted, JobAccepted)
    assert accepted.transport_policy is TransportPolicy.BROWSER  # browser.render always renders
    (fetch, *_) = Lifecycle()(submit(capture_mode=mode, transport_policy=TransportPolicy.BROWSER))
    assert isinstance(fetch, JobAccepted)
    assert fetch.job_type == "http.fetch"


@pytest.mark.parametrize(
    "options",
    [
        RenderOptions(wait_until="never"),
        RenderOptions(wait_selector=""),
        RenderOptions(wait_selector="p" * 2_000),
        RenderOptions(wait_selector="#main >> xpath=//a"),
        RenderOptions(wait_selector="div>>text=x"),
        RenderOptions(wait_selector='[title=">"] >> nth=0'),
        RenderOptions(viewport_width=0),
        RenderOptions(viewport_height=100_000),
    ],
)
def test_unusable_render_options_are_rejected_with_the_reason(options):
    (rejected,) = Lifecycle()(submit(job_type="browser.render", render=options))
    assert rejected.reason is RejectionReason.INVALID_RENDER_OPTIONS


@pytest.mark.parametrize("selector", ['[title=">>"]', "[data-x='a >> b']", "div > p", "a[href$='>']"])
def test_a_chain_marker_inside_a_quoted_string_or_a_child_combinator_is_plain_css(selector):
    assert render_problem(RenderOptions(wait_selector=selector)) is None


def test_render_options_on_a_page_that_is_not_rendered_are_rejected():
    (rejected,) = Lifecycle()(submit(render=RenderOptions()))
    assert rejected.reason is RejectionReason.INVALID_RENDER_OPTIONS


@given(
    wait_until=st.sampled_from(sorted(WAIT_EVENTS)),
    selector=st.none() | st.text(min_size=1, max_size=200).filter(lambda text: ">>" not in text),
    width=st.integers(MIN_VIEWPORT, MAX_VIEWPORT),
    height=st.integers(MIN_VIEWPORT, MAX_VIEWPORT),
)
def test_render_options_within_bounds_are_accepted(wait_until, selector, width, height):
    options = RenderOptions(
        wait_until=wait_until, wait_selector=selector, viewport_width=width, viewport_height=height
    )
    assert render_problem(options) is None
    (accepted, *_) = Lifecycle()(submit(job_type="browser.render", render=options))
    assert isinstance(accepted, JobAccepted)
    assert accepted.render == options


@pytest.mark.parametrize("mode", [CaptureMode.RAW_BODY, CaptureMode.METADATA_ONLY])
def test_the_http_capture_modes_are_accepted(mode):
    assert kinds(Lifecycle()(submit(capture_mode=mode)))[0] == "JobAccepted"


def test_a_redelivered_rejected_submission_decides_nothing():
    lifecycle = Lifecycle()
    command = submit(request=Request(url="ftp://example.com/x"))
    lifecycle(command)
    assert lifecycle(command, T0 + timedelta(seconds=3)) == []


def test_a_corrected_resubmission_after_a_rejection_is_accepted_and_continues_the_sequence():
    lifecycle = Lifecycle()
    lifecycle(submit(idempotency_key="k", deadline_at=T0 - timedelta(seconds=1)))
    events = lifecycle(submit(idempotency_key="k"))
    assert kinds(events) == ["JobAccepted"]
    assert [event.sequence for event in lifecycle.events] == [1, 2]
    assert lifecycle.job.status is JobStatus.LEASED


def test_a_cancel_of_an_unknown_job_is_audited_once_even_when_redelivered():
    lifecycle = Lifecycle()
    cancel = CancelJob(
        command_id=uuid4(), job_id=uuid4(), actor_id="op", actor_role=ActorRole.OPERATOR, reason="x"
    )
    (audit,) = lifecycle(cancel)
    assert audit.outcome is AuditOutcome.DENIED
    assert audit.detail == "no such job"
    assert lifecycle.state is None  # nothing is written under an id nobody owns
    assert lifecycle(cancel) == []


def test_an_oversized_cancel_is_refused_and_audited_with_its_fields_cut():
    lifecycle = Lifecycle()
    lifecycle(submit())
    cancel = CancelJob(
        command_id=uuid4(),
        job_id=lifecycle.job.job_id,
        actor_id="svc-a",
        actor_role=ActorRole.SERVICE,
        reason="r" * 100_000,
    )
    (audit,) = lifecycle(cancel)
    assert audit.outcome is AuditOutcome.DENIED
    assert "reason is 100000 bytes" in audit.detail
    assert len(audit.reason) <= 1_024
    assert lifecycle.job.status is JobStatus.LEASED


@pytest.mark.parametrize(
    "request_",
    [
        Request(url="https://example.com/page"),
        Request(url="HTTP://Example.COM:80/a?b=c#frag", headers={"Accept": " text/html ", "user-agent": "x"}),
        Request(url="https://Bücher.example/ü?q=ä", method=HttpMethod.HEAD),
    ],
)
def test_the_request_hash_is_the_one_every_earlier_release_computed(request_):
    """Job ids of default-keyed submissions derive from it: it must never change."""
    import hashlib
    import json

    from projections.lifecycle.identity import canonicalize

    canonical = canonicalize(request_)
    legacy_payload = json.dumps(msgspec.to_builtins(canonical.request), sort_keys=True, separators=(",", ":"))
    assert canonical.request_hash == hashlib.sha256(legacy_payload.encode()).hexdigest()
    assert canonical.request == msgspec.convert(msgspec.to_builtins(canonical.request), Request)


@pytest.mark.parametrize(
    "option",
    [
        {"job_type": "browser.render"},
        {"capture_mode": CaptureMode.METADATA_ONLY},
        {"policy_class": PolicyClass.STRICT},
        {"transport_policy": TransportPolicy.PROXY_ALLOWED},
        {"retention_class": RetentionClass.REFERENCED_ARCHIVE},
        {"cache_mode": CacheMode.BYPASS},
        {"callback_url": "https://hooks.example/done"},
    ],
)
def test_what_changes_a_jobs_output_is_part_of_its_identity(option):
    plain = submit()
    other = submit(**option)
    assert submission_identity(plain)[0] != submission_identity(other)[0]
    lifecycle = Lifecycle()
    lifecycle(plain)
    assert kinds(lifecycle(other)) != ["SubmissionReused"]


def test_render_options_are_part_of_a_rendered_jobs_identity():
    shot = submit(job_type="browser.render", capture_mode=CaptureMode.SCREENSHOT)
    wide = msgspec.structs.replace(shot, render=RenderOptions(viewport_width=1920), command_id=uuid4())
    assert submission_identity(shot)[0] != submission_identity(wide)[0]


def test_an_idempotency_key_sent_again_with_another_request_is_rejected_and_ends_no_job():
    lifecycle = Lifecycle()
    lifecycle(submit(idempotency_key="k"))
    job = lifecycle.job
    events = lifecycle(submit(idempotency_key="k", capture_mode=CaptureMode.METADATA_ONLY))
    assert kinds(events) == ["JobRejected"]
    assert events[0].reason is RejectionReason.IDEMPOTENCY_KEY_REUSED
    assert events[0].job_id == job.job_id
    assert consequences_of(lifecycle.state, events, POLICY).completions == []
    assert lifecycle.job.status is job.status
    assert kinds(lifecycle(submit(idempotency_key="k"))) == ["SubmissionReused"]


CREDENTIALED = replace(
    POLICY,
    credentials={
        "partner": CredentialGrant(
            callers=frozenset({"svc-a"}),
            job_types=frozenset({"http.fetch"}),
            origins=frozenset({"https://example.com"}),
        ),
        "proxied": CredentialGrant(origins=frozenset({"https://example.com"}), through_proxy=True),
    },
)


def test_a_job_carries_a_credential_only_by_a_name_its_caller_and_type_are_granted():
    lifecycle = Lifecycle(policy=CREDENTIALED)
    accepted, *_ = lifecycle(submit(credential="partner"))
    assert isinstance(accepted, JobAccepted)
    assert accepted.credential == "partner"
    (work,) = consequences_of(lifecycle.state, lifecycle.events, CREDENTIALED).due
    assert work.credential == "partner"
    for refused in (
        submit(credential="partner", caller_identity="svc-b"),
        submit(credential="nowhere"),
        submit(credential="partner", job_type="browser.render"),
    ):
        (rejected,) = Lifecycle(policy=CREDENTIALED)(refused)
        assert rejected.reason.value == "CREDENTIAL_NOT_ALLOWED"


@pytest.mark.parametrize(
    "url",
    [
        "https://attacker.example/collect",
        "http://example.com/page",  # the same host in clear is another origin
        "https://example.com:8443/page",
        "https://sub.example.com/page",
        "https://example.com.attacker.example/",
    ],
)
def test_a_credential_goes_only_to_the_origins_it_names(url):
    (rejected,) = Lifecycle(policy=CREDENTIALED)(submit(credential="partner", request=Request(url=url)))
    assert rejected.reason.value == "CREDENTIAL_NOT_ALLOWED"
    assert "may be sent to https://example.com only" in rejected.detail
    (accepted, *_) = Lifecycle(policy=CREDENTIALED)(
        submit(credential="partner", request=Request(url="HTTPS://Example.COM:443/other?x=1"))
    )
    assert isinstance(accepted, JobAccepted)


def test_a_credential_no_proxy_may_carry_is_refused_to_a_job_that_may_take_a_proxy():
    for name, accepted in (("partner", False), ("proxied", True)):
        events = Lifecycle(policy=CREDENTIALED)(
            submit(credential=name, transport_policy=TransportPolicy.PROXY_ALLOWED)
        )
        assert isinstance(events[0], JobAccepted) is accepted, name


def test_a_credential_changes_what_a_job_produces_and_nothing_else_changes_a_key_without_one():
    plain, key = submission_identity(submit())
    carried, carried_key = submission_identity(submit(credential="partner"))
    assert (plain, key) != (carried, carried_key)
    assert len(key) == 64


def test_an_answer_to_a_credential_makes_no_cache_entry():
    lifecycle = Lifecycle(policy=CREDENTIALED)
    lifecycle(submit(credential="partner"))
    job = lifecycle.job
    events = lifecycle(report(job, attempt_under(job, http_status=200, artifacts=(ARTIFACT,))))
    assert consequences_of(lifecycle.state, events, CREDENTIALED).cache_entries == []
