"""Which failures are the infrastructure's (wait and retry) and which are the input's (dead input).

A batch that fails for infrastructure (broker, network, disk) is retried as a whole and the log
says what it waits for; anything else is a property of some record in it, so the records are
handled one at a time and the one that fails goes to dead input with the reason.
"""

from __future__ import annotations

from aiokafka.errors import (
    KafkaError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
)

from projections.storage.base import StoreError
from streams.errors import BrokerError, RegistryUnavailableError

_INPUT_KAFKA_ERRORS = (MessageSizeTooLargeError, RecordTooLargeError, RecordListTooLargeError)


def waiting_for(exc: BaseException) -> str | None:
    """What an infrastructure failure waits for ("Kafka", "the local store", "the network"), else None."""
    if isinstance(exc, _INPUT_KAFKA_ERRORS):
        return None
    if isinstance(exc, KafkaError | BrokerError):
        return "Kafka"
    if isinstance(exc, RegistryUnavailableError):
        return "the schema registry"
    if isinstance(exc, StoreError):
        return "the local store"
    if isinstance(exc, OSError | TimeoutError):
        return "the network or disk"
    return None
