"""Principals, tokens and command signatures: what a worker trusts, and what it refuses."""

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.enums import ActorRole
from streams.auth.issue import add_to_file, issue
from streams.auth.principals import Principals, PrincipalsError, load_principals
from streams.auth.signing import Binding, private_key_from_text, sign, verify
from streams.web.cursor import decode_cursor, encode_cursor, filters_digest
from streams.web.errors import ApiError

ADMIN = issue("admin", ActorRole.ADMIN)
SERVICE = issue("svc", ActorRole.SERVICE)
PRINCIPALS = Principals.from_json(json.dumps({"principals": [ADMIN.entry, SERVICE.entry]}), "test")


def test_a_token_finds_its_principal_and_nothing_else_does():
    found = PRINCIPALS.by_token(ADMIN.token)
    assert found is not None
    assert (found.name, found.role) == ("admin", ActorRole.ADMIN)
    assert PRINCIPALS.by_token(ADMIN.token + "x") is None
    assert PRINCIPALS.by_token("") is None


def test_the_stored_entry_holds_no_secret():
    stored = json.dumps(ADMIN.entry)
    assert ADMIN.token not in stored
    assert ADMIN.signing_key not in stored


HERE = Binding("prod", "scrapestream.submit")


def test_a_signature_verifies_only_for_its_signer_and_value():
    key = private_key_from_text(SERVICE.signing_key)
    headers = sign("svc", key, b"value", HERE)
    signer = verify(PRINCIPALS, headers, b"value", HERE)
    assert not isinstance(signer, str)
    assert signer.name == "svc"
    assert "bad signature" in str(verify(PRINCIPALS, headers, b"other value", HERE))
    assert "bad signature" in str(verify(PRINCIPALS, sign("admin", key, b"value", HERE), b"value", HERE))
    assert "unknown signer" in str(verify(PRINCIPALS, sign("nobody", key, b"value", HERE), b"value", HERE))
    assert "unsigned" in str(verify(PRINCIPALS, None, b"value", HERE))


@pytest.mark.parametrize(
    "elsewhere", [Binding("staging", "scrapestream.submit"), Binding("prod", "other.submit")]
)
def test_a_signature_is_refused_on_another_deployment_or_topic(elsewhere):
    headers = sign("svc", private_key_from_text(SERVICE.signing_key), b"value", HERE)
    assert "for another topic or deployment" in str(verify(PRINCIPALS, headers, b"value", elsewhere))


def test_a_signature_of_the_first_scheme_is_refused_with_what_to_do():
    key = private_key_from_text(SERVICE.signing_key)
    old = key.sign(b"scrapestream-command/1\nsvc\nvalue")
    headers = [("scrapestream-principal", b"svc"), ("scrapestream-signature", base64.b64encode(old))]
    assert "upgrade the client" in str(verify(PRINCIPALS, headers, b"value", HERE))


@given(
    st.lists(
        st.tuples(st.sampled_from(["scrapestream-principal", "scrapestream-signature", "x"]), st.binary())
    )
)
def test_headers_that_no_key_signed_give_a_reason_never_a_principal_or_an_exception(headers):
    assert isinstance(verify(PRINCIPALS, headers, b"value", HERE), str)


@pytest.mark.parametrize(
    "document",
    [
        "not json",
        "[]",
        '{"principals": {}}',
        '{"principals": [{"name": "", "role": "ADMIN"}]}',
        '{"principals": [{"name": "a", "role": "ROOT"}]}',
        '{"principals": [{"name": "a", "role": "ADMIN", "token_sha256": "abc"}]}',
        '{"principals": [{"name": "a", "role": "ADMIN", "public_key": "!!"}]}',
        '{"principals": [{"name": "a", "role": "ADMIN"}, {"name": "a", "role": "VIEWER"}]}',
    ],
)
def test_an_unusable_principals_document_is_refused_with_where_and_why(document):
    with pytest.raises(PrincipalsError, match="test"):
        Principals.from_json(document, "test")


def test_auth_on_without_principals_refuses_to_start_and_off_needs_none():
    with pytest.raises(PrincipalsError, match="SCRAPESTREAM_AUTH_ENABLED=false"):
        load_principals(True, None, None)
    assert load_principals(False, None, None) is None


def test_principals_added_to_a_file_are_private_and_names_stay_unique(tmp_path):
    path = tmp_path / "principals.json"
    add_to_file(path, ADMIN.entry)
    add_to_file(path, SERVICE.entry)
    assert path.stat().st_mode & 0o077 == 0
    assert len(Principals.from_file(path)) == 2
    with pytest.raises(PrincipalsError, match="already has"):
        add_to_file(path, issue("svc", ActorRole.VIEWER).entry)


def test_a_cursor_resumes_only_the_listing_that_made_it():
    digest = filters_digest("svc", None)
    position = "998203961788028/9f1c1c52-6d8e-4c1e-9a33-5d2a4b1f9e01"
    cursor = encode_cursor(position, digest)
    assert decode_cursor(cursor, digest) == position
    with pytest.raises(ApiError, match="other filters"):
        decode_cursor(cursor, filters_digest("other", None))


@given(st.text())
def test_any_string_as_a_cursor_is_a_position_or_a_400(text):
    statuses = []
    try:
        decode_cursor(text, "digest")
    except ApiError as error:
        statuses.append(error.status)
    assert statuses in ([], [400])
