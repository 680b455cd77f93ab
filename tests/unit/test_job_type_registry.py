"""Where the project's rules on job types and settings differ from the seed's handler registry."""

import asyncio
from importlib.metadata import EntryPoint

import pytest

from streams.jobtypes import discover
from streams.settings import SettingsError, load_settings
from tests.lifecycle import Lifecycle, kinds, submit


class First:
    name = "test.twice"
    label = "The first to claim its name"

    async def run(self, work):  # type: ignore[no-untyped-def]
        raise NotImplementedError


class Second(First):
    label = "A second plugin under the same name"


class Builtin(First):
    name = "http.fetch"
    label = "A plugin claiming a built-in name"


def entry(name: str, target: str) -> EntryPoint:
    return EntryPoint(name=name, value=f"{__name__}:{target}", group="scrapestream.job_types")


def test_a_second_registration_of_a_name_is_skipped_loudly_never_replacing_the_first(caplog):
    loaded = discover([entry("first", "First"), entry("second", "Second"), entry("builtin", "Builtin")])
    assert list(loaded) == ["test.twice"]
    assert loaded["test.twice"].label == First.label  # the seed overwrites; here the first stays
    warned = [record.getMessage() for record in caplog.records]
    assert any("'test.twice' is taken" in message for message in warned)
    assert any("'http.fetch' is taken" in message for message in warned)


def test_a_job_of_an_unknown_type_is_rejected_at_submit_not_run_under_the_default():
    rejected = Lifecycle()(submit(job_type="test.nowhere"))
    assert kinds(rejected)[0] == "JobRejected"
    assert rejected[0].reason.value == "UNKNOWN_JOB_TYPE"


@pytest.mark.parametrize(
    ("setting", "value"),
    [("default_max_attempts", 0), ("default_max_runtime_ms", -1), ("retry_base_ms", "NaN")],
)
def test_a_bad_deployment_wide_setting_refuses_to_start_instead_of_falling_back(setting, value):
    with pytest.raises(SettingsError, match=f"SCRAPESTREAM_{setting.upper()}"):
        load_settings(**{setting: value})


async def test_a_veto_hook_that_fails_or_hangs_refuses_the_delete(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    from uuid import uuid4

    from streams import jobtypes

    class Failing:
        async def veto_history_deletion(self, job_id: object) -> str | None:
            raise RuntimeError("the partner database is down")

    class Hanging:
        async def veto_history_deletion(self, job_id: object) -> str | None:
            await asyncio.sleep(3600)
            return None

    class Allowing:
        async def veto_history_deletion(self, job_id: object) -> str | None:
            return None

    refused = await jobtypes.history_deletion_veto(Failing(), uuid4())
    assert refused is not None
    assert "the partner database is down" not in refused  # what the caller reads: no internals
    assert "the partner database is down" in caplog.text  # what the operator reads
    monkeypatch.setattr(jobtypes, "VETO_TIMEOUT_S", 0.05)
    assert await jobtypes.history_deletion_veto(Hanging(), uuid4()) is not None  # fails closed
    assert await jobtypes.history_deletion_veto(Allowing(), uuid4()) is None
    assert await jobtypes.history_deletion_veto(object(), uuid4()) is None  # no hook: allowed
