"""Exceptions of the I/O shell; all derive from `schemas.errors.ScrapestreamError`.

BrokerError   a broker could not be started, reached, or used as configured
UsageError    a setting or an argument the command cannot work with; the CLI exits 2 for it
"""

from schemas.errors import ScrapestreamError


class BrokerError(ScrapestreamError):
    """A broker could not be started, reached, or used as configured (the message says which setting)."""


class UsageError(ScrapestreamError):
    """A setting or an argument the command cannot work with; the message names it and the fix."""
