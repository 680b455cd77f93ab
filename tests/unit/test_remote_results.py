"""A remote executor's result is checked against its job type's declared schema, or is a typed failure."""

import contextlib
import io
from datetime import UTC, datetime

import fastavro
import pytest
from fastavro.schema import fingerprint, to_parsing_canonical_form
from hypothesis import given
from hypothesis import strategies as st

from streams.agents.remote import RemoteResults, ResultMismatchError
from streams.auth.principals import Principals, PrincipalsError

SCHEMA = {
    "type": "record",
    "name": "Summary",
    "fields": [{"name": "title", "type": "string"}, {"name": "words", "type": "int"}],
}


class Remote:
    name = "test.remote"
    label = "remote"
    remote = True
    result_schema = SCHEMA

    def outcome(self, result):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def encoded(schema: dict, record: dict) -> bytes:
    parsed = fastavro.parse_schema(schema)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, record)
    return (
        b"\xc3\x01"
        + bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))
        + out.getvalue()
    )


RESULTS = RemoteResults({"test.remote": Remote()}, artifacts=None, clock=lambda: datetime.now(UTC))  # type: ignore[arg-type]
GOOD = encoded(SCHEMA, {"title": "Hello", "words": 5})


def test_a_result_in_the_declared_schema_is_the_record_it_encodes():
    assert RESULTS.checked("test.remote", GOOD) == {"title": "Hello", "words": 5}


@pytest.mark.parametrize(
    "result",
    [
        None,
        GOOD + b"\x00",  # something after the record
        GOOD[:-1],  # cut short
        encoded(
            {"type": "record", "name": "Other", "fields": [{"name": "title", "type": "string"}]},
            {"title": "x"},
        ),
        GOOD[10:],  # no single-object header
    ],
)
def test_anything_else_is_a_result_mismatch(result):
    with pytest.raises(ResultMismatchError):
        RESULTS.checked("test.remote", result)


@given(st.binary(max_size=64))
def test_no_bytes_an_executor_sends_make_the_check_raise_anything_but_a_mismatch(tail):
    with contextlib.suppress(ResultMismatchError):
        RESULTS.checked("test.remote", GOOD[:10] + tail)


def test_a_principal_runs_only_the_job_types_it_is_given():
    principals = Principals.from_json(
        '{"principals": [{"name": "exec", "role": "SERVICE", "runs": ["a.b"]}]}', "t"
    )
    assert principals.named("exec").runs == frozenset({"a.b"})
    with pytest.raises(PrincipalsError, match="runs must be a list"):
        Principals.from_json('{"principals": [{"name": "exec", "role": "SERVICE", "runs": "a.b"}]}', "t")


class CountingStore:
    """An artifact store that only counts what it was asked to keep."""

    def __init__(self) -> None:
        self.puts = 0

    async def put(self, *_: object) -> None:
        self.puts += 1
        raise AssertionError("nothing may be stored")


class CountingRemote(Remote):
    def __init__(self) -> None:
        self.outcomes = 0

    def outcome(self, result):  # type: ignore[no-untyped-def]
        self.outcomes += 1
        raise AssertionError("the persist step may not see it")


async def test_a_result_that_fails_its_schema_never_reaches_the_persist_step():
    from dataclasses import replace
    from uuid import uuid4

    from projections.lifecycle.policy import ExecutionProfile
    from schemas.commands import ReportRemoteAttempt
    from tests.lifecycle import POLICY, Lifecycle, submit

    store, remote = CountingStore(), CountingRemote()
    results = RemoteResults({"test.remote": remote}, store, lambda: datetime.now(UTC))  # type: ignore[arg-type]
    bad = encoded(
        {"type": "record", "name": "Other", "fields": [{"name": "t", "type": "string"}]}, {"t": "x"}
    )
    policy = replace(POLICY, profiles={**POLICY.profiles, "test.remote": ExecutionProfile(10_000, 2)})
    lifecycle = Lifecycle(policy=policy)
    lifecycle(submit(job_type="test.remote"))
    job = lifecycle.job
    for result in (bad, GOOD + b"\x00", None):
        report = ReportRemoteAttempt(
            job_id=job.job_id, job_type="test.remote", attempt_number=1, lease_id=uuid4(), result_body=result
        )
        attempt = await results.attempt(report, job)
        assert attempt.failure is not None
        assert attempt.failure.code == "RESULT_SCHEMA_MISMATCH"
        assert attempt.artifacts == ()
    assert (store.puts, remote.outcomes) == (0, 0)
