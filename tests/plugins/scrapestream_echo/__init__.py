"""A job type plugin as a deployment would ship one: installed beside scrapestream, found through
the `scrapestream.job_types` entry-point group."""

from __future__ import annotations

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
