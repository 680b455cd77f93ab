import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from streams.callbacks.signing import signature_headers

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_signatures_verify_with_an_independent_standard_webhooks_verifier():
    body = b'{"job_id": "x", "status": "SUCCEEDED"}'
    import time

    headers = signature_headers(SECRET, "msg_1", int(time.time()), body)
    assert Webhook(SECRET).verify(body, headers) == {"job_id": "x", "status": "SUCCEEDED"}


def test_a_tampered_body_does_not_verify():
    import time

    headers = signature_headers(SECRET, "msg_1", int(time.time()), b'{"a": 1}')
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(b'{"a": 2}', headers)
