"""Job types: what executors run. `http.fetch` is built in; a deployment adds its own job types
through the `scrapestream.job_types` entry-point group, without editing scrapestream.

An entry point names a class (instantiated without arguments) or an object with `name`, `label`,
an optional `profile` (`(max_runtime_ms, max_attempts)`, checked like `SCRAPESTREAM_PROFILES`)
and `async def run(work: DueWork) -> Outcome`, or, for a type outside executors run (`remote =
True`), a `result_schema` (an Avro record schema, as parsed JSON) and `def outcome(result) ->
Outcome`. One that cannot be loaded, or lacks these, is skipped with a warning; it never replaces a
built-in type or one loaded before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, replace
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol, TypeGuard, cast
from uuid import UUID

import fastavro

from projections.lifecycle.policy import Policy
from schemas.work import DueWork
from streams.fetch.browser import browser_available, browser_problem
from streams.readers.fleet import Capabilities
from streams.settings import Settings

log = logging.getLogger(__name__)
VETO_TIMEOUT_S = 10.0
_CREDENTIAL: ContextVar[Mapping[str, str] | None] = ContextVar("credential", default=None)
ENTRY_POINT_GROUP = "scrapestream.job_types"
BUILT_IN = {"http.fetch": "Fetch a URL over HTTP", "browser.render": "Render a page in a headless browser"}


@dataclass(frozen=True)
class Outcome:
    """What a job type's run made of its work: a body to store, or a typed failure."""

    body: bytes | None = None
    content_type: str = "application/octet-stream"
    http_status: int | None = None
    final_url: str | None = None
    failure_code: str | None = None  # None: the attempt succeeded
    failure_message: str = ""
    retryable: bool = False


class JobType(Protocol):
    name: str
    label: str

    async def run(self, work: DueWork) -> Outcome: ...


class RemoteJobType(Protocol):
    """A job type outside executors run: they read its due topic and report results in its
    `result_schema`; on the trusted worker, `outcome` turns a checked result into what is stored
    (so the executor never decides what is kept, nor under which key)."""

    name: str
    label: str
    remote: bool
    result_schema: Mapping[str, Any]

    def outcome(self, result: Mapping[str, Any]) -> Outcome: ...


AnyJobType = JobType | RemoteJobType


def is_remote(job_type: object) -> TypeGuard[RemoteJobType]:
    return getattr(job_type, "remote", False) is True


def local_types(job_types: Mapping[str, AnyJobType]) -> dict[str, JobType]:
    """The types this worker's executor runs itself."""
    return {name: job_type for name, job_type in job_types.items() if not is_remote(job_type)}  # type: ignore[misc]


def credential() -> Mapping[str, str] | None:
    """Inside a job type's `run`: the headers of the credential its job carries, resolved by this
    worker now (None without one). Never put them in an `Outcome`: what a run returns is stored."""
    return _CREDENTIAL.get()


@contextlib.contextmanager
def carrying(headers: Mapping[str, str] | None) -> Iterator[None]:
    """`credential()` answers `headers` for the run inside."""
    token = _CREDENTIAL.set(headers)
    try:
        yield
    finally:
        _CREDENTIAL.reset(token)


async def history_deletion_veto(job_type: object, job_id: UUID) -> str | None:
    """Why a job type that owns state outside scrapestream refuses to have a job's history deleted
    (its optional `async def veto_history_deletion(job_id) -> str | None`), or None. A hook that
    fails or does not answer in time refuses: a history delete fails closed."""
    hook = getattr(job_type, "veto_history_deletion", None)
    if not inspect.iscoroutinefunction(hook):
        return None
    try:
        async with asyncio.timeout(VETO_TIMEOUT_S):
            verdict = await hook(job_id)
    except Exception:  # its text may hold what only operators should read: logged, not answered
        log.exception(
            "job type %s: its history veto failed for job %s", getattr(job_type, "name", "?"), job_id
        )
        return "the job type could not be asked (its veto failed; the worker's log has the error)"
    return None if verdict is None else str(verdict)[:1_000]


def discover(found: Iterable[EntryPoint] | None = None) -> dict[str, AnyJobType]:
    """The job types the installed plugins add, by name."""
    loaded: dict[str, AnyJobType] = {}
    for entry_point in entry_points(group=ENTRY_POINT_GROUP) if found is None else found:
        job_type = _load(entry_point)
        if job_type is None:
            continue
        if job_type.name in BUILT_IN or job_type.name in loaded:
            log.warning("job type plugin %s: the name %r is taken; skipped", entry_point.value, job_type.name)
            continue
        loaded[job_type.name] = job_type
    return loaded


def _load(entry_point: EntryPoint) -> AnyJobType | None:
    try:
        target = entry_point.load()
        job_type = target() if inspect.isclass(target) else target
    except Exception as exc:  # a broken plugin must not stop the worker
        log.warning(
            "job type plugin %s could not be loaded: %s: %s", entry_point.value, type(exc).__name__, exc
        )
        return None
    problem = _unusable(job_type)
    if problem is not None:
        log.warning("job type plugin %s is skipped: %s", entry_point.value, problem)
        return None
    return cast(AnyJobType, job_type)


def _unusable(job_type: object) -> str | None:
    name, label = getattr(job_type, "name", None), getattr(job_type, "label", None)
    if not isinstance(name, str) or not name or len(name) > 64:
        return "its name must be a non-empty string of at most 64 characters"
    if not isinstance(label, str):
        return "its label must be a string"
    if is_remote(job_type):
        return _remote_problem(job_type)
    if not inspect.iscoroutinefunction(getattr(job_type, "run", None)):
        return "its run must be an async method"
    return None


def _remote_problem(job_type: RemoteJobType) -> str | None:
    if not callable(getattr(job_type, "outcome", None)):
        return "a remote type needs an outcome(result) method"
    try:
        parsed = fastavro.parse_schema(dict(getattr(job_type, "result_schema", None) or {}))
    except Exception as exc:
        return f"its result_schema is not an Avro schema: {exc}"
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        return "its result_schema must be an Avro record"
    return None


def deployment_policy(settings: Settings, job_types: Mapping[str, AnyJobType]) -> Policy:
    """The lifecycle's rules with the plugins' types runnable and their declared profiles (which
    `SCRAPESTREAM_PROFILES` overrides); a type that declares none, or an unusable one (with a
    warning), runs under the deployment default."""
    declared = {name: profile for name, job_type in job_types.items() if (profile := _profile(job_type))}
    policy = settings.policy(declared=declared)
    undeclared = {
        name: policy.default_profile for name in [*BUILT_IN, *job_types] if policy.profile(name) is None
    }
    return replace(
        policy,
        profiles=dict(policy.profiles) | undeclared,
        fallbacks=policy.fallbacks | set(undeclared),
        remote_types=frozenset(name for name, job_type in job_types.items() if is_remote(job_type)),
    )


def runnable_here(settings: Settings, job_types: Mapping[str, AnyJobType]) -> frozenset[str]:
    """The job types this worker's executor runs: `http.fetch`, `browser.render` where there is a
    browser, and its plugins' types (not the remote ones: outside executors run those)."""
    built_in = frozenset(BUILT_IN) - (frozenset() if browser_available(settings) else {"browser.render"})
    return built_in | frozenset(local_types(job_types))


def _profile(job_type: object) -> tuple[float, float] | None:
    """The profile a job type declares; anything but a pair of numbers is unusable (NaN)."""
    profile = getattr(job_type, "profile", None)
    if profile is None:
        return None
    try:
        runtime, attempts = profile
        return float(runtime), float(attempts)
    except (TypeError, ValueError):
        return math.nan, math.nan


def labels(settings: Settings, job_types: Mapping[str, AnyJobType]) -> dict[str, str]:
    """Each type's label: its plugin's, else `SCRAPESTREAM_JOB_TYPE_LABELS` (for a type whose plugin
    runs on other workers only), else the built-in one."""
    return (
        BUILT_IN
        | dict(settings.job_type_labels)
        | {name: job_type.label for name, job_type in job_types.items()}
    )


def capabilities_here(
    settings: Settings, job_types: Mapping[str, AnyJobType], policy: Policy
) -> Capabilities:
    """The job types this worker's executor reads, and why it runs none of the others it knows."""
    known = {*policy.profiles} - policy.remote_types
    if settings.executor_concurrency == 0:
        why = "SCRAPESTREAM_EXECUTOR_CONCURRENCY is 0 on this worker: its executor runs nothing"
        return Capabilities(frozenset(), {name: why for name in known})
    runs = runnable_here(settings, job_types)
    cannot_run = {name: "no plugin on this worker provides it" for name in known - runs}
    problem = browser_problem(settings)
    if problem is not None:
        cannot_run["browser.render"] = problem
    return Capabilities(runs, cannot_run)
