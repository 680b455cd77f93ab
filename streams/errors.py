"""Exceptions of the I/O shell; all derive from `schemas.errors.ScrapestreamError`.

BrokerError          the embedded broker could not be started or reached
"""

from schemas.errors import ScrapestreamError


class BrokerError(ScrapestreamError):
    """The embedded broker could not be started, or did not answer in time."""
