"""Bounds on what a submission or cancel may carry, so nothing derived from it can outgrow a record.

Every record the lifecycle writes about a job (`JobAccepted`, `JobCompleted`, `CallbackDue`, …)
is built from these fields; with them bounded, those records stay far below Kafka's 1 MB default.
"""

from __future__ import annotations

from collections.abc import Mapping

MAX_URL_BYTES = 8_192
MAX_CALLBACK_URL_BYTES = 2_048
MAX_HEADER_VALUE_BYTES = 4_096
MAX_CALLER_BYTES = 256
MAX_IDEMPOTENCY_KEY_BYTES = 256
MAX_LABELS = 32
MAX_LABEL_KEY_BYTES = 128
MAX_LABEL_VALUE_BYTES = 1_024
MAX_REASON_BYTES = 1_024
MAX_ACTOR_BYTES = 256
MAX_MESSAGE_BYTES = 1_024


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def clip(text: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, marked when cut."""
    if utf8_len(text) <= limit:
        return text
    cut = text.encode("utf-8", "surrogatepass")[: limit - 3].decode("utf-8", "ignore")
    return cut + "..."


def oversized_field(fields: Mapping[str, tuple[str | None, int]]) -> str | None:
    """The first `name (n bytes > limit)` among fields over their limit, or None."""
    for name, (value, limit) in fields.items():
        if value is not None and utf8_len(value) > limit:
            return f"{name} is {utf8_len(value)} bytes, more than {limit}"
    return None


def oversized_labels(labels: Mapping[str, str]) -> str | None:
    if len(labels) > MAX_LABELS:
        return f"{len(labels)} labels, more than {MAX_LABELS}"
    for key, value in labels.items():
        problem = oversized_field(
            {
                f"label key {clip(key, 64)!r}": (key, MAX_LABEL_KEY_BYTES),
                f"label {clip(key, 64)!r}": (value, MAX_LABEL_VALUE_BYTES),
            }
        )
        if problem is not None:
            return problem
    return None
