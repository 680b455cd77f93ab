"""Standard Webhooks signatures: HMAC-SHA256 over `id.timestamp.body`, keyed by a `whsec_` secret."""

import base64
import hashlib
import hmac


def signature_headers(secret: str, webhook_id: str, timestamp_s: int, body: bytes) -> dict[str, str]:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{webhook_id}.{timestamp_s}.".encode() + body
    digest = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(timestamp_s),
        "webhook-signature": f"v1,{digest}",
    }
