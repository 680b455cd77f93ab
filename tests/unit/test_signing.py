import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from streams.callbacks.keys import CallbackKeys
from streams.callbacks.signing import signature_headers

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_signatures_verify_with_an_independent_standard_webhooks_verifier():
    body = b'{"job_id": "x", "status": "SUCCEEDED"}'
    import time

    headers = signature_headers([SECRET], "msg_1", int(time.time()), body)
    assert Webhook(SECRET).verify(body, headers) == {"job_id": "x", "status": "SUCCEEDED"}


def test_a_tampered_body_does_not_verify():
    import time

    headers = signature_headers([SECRET], "msg_1", int(time.time()), b'{"a": 1}')
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(b'{"a": 2}', headers)


def test_each_caller_has_its_own_key_and_another_callers_does_not_verify():
    import time

    keys = CallbackKeys(SECRET, {"svc-b": (1, 2)})
    body = b'{"job_id": "x", "caller_identity": "svc-a"}'
    headers = signature_headers(keys.signing("svc-a"), "msg_1", int(time.time()), body)
    assert Webhook(keys.key("svc-a", 1)).verify(body, headers)
    for other in (keys.key("svc-b", 1), keys.key("svc-b", 2), SECRET):
        with pytest.raises(WebhookVerificationError):
            Webhook(other).verify(body, headers)


def test_while_a_key_rotates_each_callback_carries_both_signatures_and_either_key_verifies():
    import time

    keys = CallbackKeys(SECRET, {"svc-b": (1, 2)})
    body = b'{"job_id": "y"}'
    headers = signature_headers(keys.signing("svc-b"), "msg_2", int(time.time()), body)
    assert len(headers["webhook-signature"].split(" ")) == 2
    for generation in (1, 2):
        assert Webhook(keys.key("svc-b", generation)).verify(body, headers)
    assert keys.key("svc-b", 1) != keys.key("svc-b", 2) != keys.key("svc-a", 2)


def test_without_a_secret_a_callback_still_carries_its_id_and_time():
    headers = signature_headers([], "msg_3", 1_700_000_000, b"{}")
    assert headers == {"webhook-id": "msg_3", "webhook-timestamp": "1700000000"}
