"""A Kafka record's headers as scrapestream reads and writes them: (name, raw value) pairs."""

from collections.abc import Sequence

Headers = Sequence[tuple[str, bytes]]  # aiokafka reads a list of pairs and writes any sequence of them
