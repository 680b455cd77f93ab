"""The Kafka security settings: each contradiction named at once, the password never shown, the
options every client is built with, and the ACLs each role is given (as one table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.certificates import CertificateAuthority
from streams.broker.acls import Acl, Deployment, acls_for, missing
from streams.settings import SettingsError, load_settings

SCRAM = {
    "kafka_security_protocol": "SASL_SSL",
    "kafka_sasl_mechanism": "SCRAM-SHA-512",
    "kafka_sasl_username": "worker",
    "kafka_sasl_password": "the-password-0123",
}


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"kafka_security_protocol": "SASL_SSL"}, "needs SCRAPESTREAM_KAFKA_SASL_MECHANISM"),
        (SCRAM | {"kafka_sasl_mechanism": "GSSAPI"}, "SCRAPESTREAM_KAFKA_SASL_MECHANISM: Input should be"),
        (SCRAM | {"kafka_security_protocol": "TLS"}, "SCRAPESTREAM_KAFKA_SECURITY_PROTOCOL: Input should be"),
        ({"kafka_sasl_username": "worker"}, "does not log in: set it to SASL_SSL"),
        ({"kafka_ssl_ca_file": "/nowhere/ca.pem"}, "does not use TLS"),
        (
            SCRAM | {"kafka_ssl_ca_file": "/nowhere/ca.pem"},
            "SCRAPESTREAM_KAFKA_SSL_CA_FILE: no file at /nowhere/ca.pem",
        ),
        (SCRAM | {"kafka_ssl_cert_file": "/nowhere/c.pem"}, "needs both SCRAPESTREAM_KAFKA_SSL_CERT_FILE"),
        (SCRAM | {"kafka_sasl_password_file": "/nowhere/p"}, "set SCRAPESTREAM_KAFKA_SASL_PASSWORD or"),
    ],
)
def test_each_contradiction_of_the_kafka_security_settings_is_named(settings, named):
    with pytest.raises(SettingsError, match=named):
        load_settings(**settings)


def test_the_password_is_never_in_a_repr_an_error_or_the_settings_shown():
    settings = load_settings(**SCRAM)
    access = settings.kafka_access
    assert "the-password-0123" not in repr(access)
    assert "the-password-0123" not in repr(settings)
    assert "the-password-0123" not in str(settings.model_dump())
    assert access.client_options()["sasl_plain_password"] == "the-password-0123"  # only to aiokafka
    assert access.principal == "User:worker"


def test_a_password_file_is_read_when_a_client_is_built(tmp_path: Path):
    secret = tmp_path / "password"
    secret.write_text("first\n")
    access = load_settings(
        **(SCRAM | {"kafka_sasl_password": None, "kafka_sasl_password_file": secret})
    ).kafka_access
    assert access.client_options()["sasl_plain_password"] == "first"
    secret.write_text("rotated\n")
    assert access.client_options()["sasl_plain_password"] == "rotated"


def test_tls_options_carry_the_ca_and_the_client_certificate(tmp_path: Path):
    authority = CertificateAuthority(tmp_path)
    issued = authority.issue("svc")
    settings = load_settings(
        kafka_security_protocol="SSL",
        kafka_ssl_ca_file=authority.ca_file,
        kafka_ssl_cert_file=issued.certificate,
        kafka_ssl_key_file=issued.key,
    )
    options = settings.kafka_access.client_options()
    assert options["security_protocol"] == "SSL"
    assert options["ssl_context"].check_hostname is True
    assert "sasl_mechanism" not in options
    assert settings.kafka_access.principal is None  # the cluster maps the certificate's subject


DEPLOYMENT = Deployment("p", "g")


@pytest.mark.parametrize(
    ("role", "lines"),
    [
        (
            "worker",
            [
                "ALLOW User:u READ GROUP LITERAL g",
                "ALLOW User:u DESCRIBE TOPIC PREFIXED p.",
                "ALLOW User:u DESCRIBE_CONFIGS TOPIC PREFIXED p.",
                "ALLOW User:u READ TOPIC PREFIXED p.",
                "ALLOW User:u WRITE TOPIC PREFIXED p.",
                "ALLOW User:u DESCRIBE TRANSACTIONAL_ID PREFIXED g.",
                "ALLOW User:u WRITE TRANSACTIONAL_ID PREFIXED g.",
            ],
        ),
        (
            "consumer",
            [
                "ALLOW User:u READ GROUP PREFIXED u.",
                "ALLOW User:u DESCRIBE TOPIC LITERAL p.answers",
                "ALLOW User:u READ TOPIC LITERAL p.answers",
                "ALLOW User:u DESCRIBE TOPIC LITERAL p.changes",
                "ALLOW User:u READ TOPIC LITERAL p.changes",
                "ALLOW User:u DESCRIBE TOPIC LITERAL p.completions",
                "ALLOW User:u READ TOPIC LITERAL p.completions",
            ],
        ),
    ],
)
def test_each_role_is_given_exactly_its_acls(role, lines):
    assert [acl.line() for acl in acls_for(role, "User:u", DEPLOYMENT)] == lines


def test_no_outside_role_touches_an_internal_topic():
    internal = {f"p.{name}" for name in ("commands", "events", "due", "controls", "outbox", "snapshots")}
    for role in ("producer", "consumer", "remote-executor"):
        given = acls_for(role, "User:u", Deployment("p", "g", due_topics=("p.due.t",)))
        assert not [acl for acl in given if acl.resource_type == "TOPIC" and acl.name in internal]
        assert not [acl for acl in given if acl.resource_type == "TOPIC" and acl.pattern == "PREFIXED"]


def test_missing_acls_are_those_a_checked_resource_does_not_allow():
    needed = acls_for("worker", "User:u", DEPLOYMENT)
    allowed = {("TOPIC", "p.events"): frozenset({"READ", "DESCRIBE", "DESCRIBE_CONFIGS"})}
    assert missing(needed, allowed) == [Acl("TOPIC", "PREFIXED", "p.", "WRITE", "User:u")]
    assert missing(needed, {}) == []  # nothing checked, nothing known to be missing
