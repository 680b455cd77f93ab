"""Exceptions of the I/O shell; all derive from `schemas.errors.ScrapestreamError`.

BrokerError   a broker could not be started, reached, or used as configured
UsageError    a setting or an argument the command cannot work with; the CLI exits 2 for it
RegistryUnavailableError  the schema registry did not answer: its reader waits and tries again
"""

from schemas.errors import ScrapestreamError


class BrokerError(ScrapestreamError):
    """A broker could not be started, reached, or used as configured (the message says which setting)."""


class UsageError(ScrapestreamError):
    """A setting or an argument the command cannot work with; the message names it and the fix."""


class RegistryUnavailableError(ScrapestreamError):
    """The schema registry did not answer: whoever needs it waits and tries again."""
