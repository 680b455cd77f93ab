"""Standard Webhooks headers: the id and time always, and HMAC-SHA256 over `id.timestamp.body`
keyed by each `whsec_` secret given (none: unsigned)."""

import base64
import hashlib
import hmac
from collections.abc import Sequence


def signature_headers(
    secrets: Sequence[str], webhook_id: str, timestamp_s: int, body: bytes
) -> dict[str, str]:
    headers = {"webhook-id": webhook_id, "webhook-timestamp": str(timestamp_s)}
    signed = f"{webhook_id}.{timestamp_s}.".encode() + body
    signatures = []
    for secret in secrets:
        key = base64.b64decode(secret.removeprefix("whsec_"))
        signatures.append("v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode())
    if signatures:
        headers["webhook-signature"] = " ".join(signatures)
    return headers
