"""A job type plugin as a deployment would ship one: installed beside scrapestream, found through
the `scrapestream.job_types` entry-point group."""

from __future__ import annotations

import asyncio
from collections import Counter

from schemas.work import DueWork
from streams.jobtypes import Outcome


class Echo:
    """Answers with the URL it was given, without a request."""

    name = "test.echo"
    label = "Echo the URL back"
    profile = (5_000, 2)

    async def run(self, work: DueWork) -> Outcome:
        return Outcome(body=f"echo {work.request.url}".encode(), content_type="text/plain")


class Plain:
    """Declares no profile: it runs under the deployment's default."""

    name = "test.plain"
    label = "No profile of its own"

    async def run(self, work: DueWork) -> Outcome:
        return Outcome(body=b"plain")


class Sleeper:
    """Sleeps for the milliseconds the URL's last segment names (on its first run for a URL only,
    when the URL ends in `/once`); counts its runs per URL."""

    name = "test.sleeper"
    label = "Sleeps, then answers"
    profile = (6_000, 3)
    runs: Counter[str] = Counter()

    async def run(self, work: DueWork) -> Outcome:
        url = work.request.url
        self.runs[url] += 1
        segments = url.rstrip("/").split("/")
        once = segments[-1] == "once"
        milliseconds = int(segments[-2] if once else segments[-1])
        if not once or self.runs[url] == 1:
            await asyncio.sleep(milliseconds / 1000)
        return Outcome(body=f"slept {milliseconds} ms".encode())


class SleeperOnce(Sleeper):
    """The sleeper with a single attempt."""

    name = "test.sleeper-once"
    label = "Sleeps, then answers; one attempt only"
    profile = (6_000, 1)


class Keeper:
    """Answers like echo, and keeps every history: it owns state outside scrapestream."""

    name = "test.keeper"
    label = "Keeps its histories"
    profile = (5_000, 1)

    async def run(self, work: DueWork) -> Outcome:
        return Outcome(body=b"kept")

    asked: list[object] = []  # the jobs its veto was asked about, by every instance

    async def veto_history_deletion(self, job_id: object) -> str | None:
        Keeper.asked.append(job_id)
        return "the partner's invoice still points at it"


class Remote:
    """Run by an outside executor, which reports a title and its length; what is stored is decided
    here, from the checked result."""

    name = "test.remote"
    label = "Summarised by an outside executor"
    profile = (10_000, 2)
    remote = True
    result_schema = {
        "type": "record",
        "name": "Summary",
        "namespace": "test.remote",
        "fields": [{"name": "title", "type": "string"}, {"name": "words", "type": "int"}],
    }

    def outcome(self, result: dict[str, object]) -> Outcome:
        return Outcome(
            body=f"{result['title']} ({result['words']} letters)".encode(), content_type="text/plain"
        )

    def output_key(self, work: DueWork) -> str:
        """Where a result too large for a record is uploaded: this type's own layout."""
        return f"summaries/{work.job_id}/{work.attempt_number}"


class Refusing:
    """Fails every time, retryably: only its one-attempt profile stops it."""

    name = "test.refusing"
    label = "Always fails, retryably"
    profile = (5_000, 1)

    async def run(self, work: DueWork) -> Outcome:
        return Outcome(failure_code="TEST_REFUSED", failure_message="refused on purpose", retryable=True)


class BrokenProfile:
    name = "test.broken-profile"
    label = "Declares a profile scrapestream cannot use"
    profile = (-1, 2.5)

    async def run(self, work: DueWork) -> Outcome:
        return Outcome(body=b"ran under the default profile")


class Nameless:
    label = "Has no name"

    async def run(self, work: DueWork) -> Outcome:
        return Outcome()
