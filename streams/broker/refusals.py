"""Why a cluster refuses a client, said once at start and naming the setting to change.

aiokafka logs a refused login or certificate and retries it as if the broker were down; `admitted`
opens one connection itself and turns each refusal into a `KafkaAccessError` (the CLI exits 2). A
broker that does not answer at all is left to the callers' retries. `denial` names the operation and
resource of an authorization error (a missing ACL) met later.
"""

from __future__ import annotations

import contextlib
import ssl

from aiokafka import errors
from aiokafka.conn import create_conn
from aiokafka.protocol.metadata import MetadataRequest

from streams.broker.access import PROTOCOL, TLS_FILES, KafkaAccess, KafkaAccessError

PROBE_TIMEOUT_MS = 10_000
CERTIFICATE_ALERTS = ("CERTIFICATE_REQUIRED", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN", "UNKNOWN_CA")
HOSTNAME_MISMATCH_CODES = (62, 64)  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH


async def admitted(access: KafkaAccess) -> bool:
    """Whether the first bootstrap address answered and admitted this client (False: it did not answer
    at all); `KafkaAccessError` when it refuses its protocol, certificate or login."""
    host, _, port = access.bootstrap.split(",")[0].strip().rpartition(":")
    options = access.client_options()
    options.pop("bootstrap_servers")
    try:
        connection = await create_conn(host, int(port), request_timeout_ms=PROBE_TIMEOUT_MS, **options)
    except ssl.SSLCertVerificationError as exc:
        raise KafkaAccessError(_untrusted(access, exc)) from None
    except ssl.SSLError as exc:
        raise KafkaAccessError(_tls_refused(access, exc)) from None
    except errors.UnsupportedSaslMechanismError as exc:
        raise KafkaAccessError(f"SCRAPESTREAM_KAFKA_SASL_MECHANISM: {exc}") from None
    except (
        errors.SaslAuthenticationFailed,
        errors.AuthenticationFailedError,
        errors.IllegalSaslStateError,
    ) as exc:
        raise KafkaAccessError(_login_refused(access, exc)) from None
    except errors.KafkaConnectionError as exc:  # it accepted the connection, then closed it unanswered
        if isinstance(exc.__cause__, ssl.SSLError):
            raise KafkaAccessError(_tls_refused(access, exc.__cause__)) from None
        raise KafkaAccessError(_other_protocol(access)) from None
    except (TimeoutError, OSError, errors.KafkaError):
        return False  # down or unreachable: the callers retry and say so
    try:
        await connection.send(MetadataRequest([]))
    except errors.KafkaConnectionError:
        raise KafkaAccessError(_other_protocol(access)) from None
    except (TimeoutError, errors.KafkaError):
        return False
    finally:
        with contextlib.suppress(Exception):
            connection.close()
    return True


def _other_protocol(access: KafkaAccess) -> str:
    return (
        f"{PROTOCOL}: the broker at {access.bootstrap} closed the connection unanswered over "
        f"{access.security_protocol}; its listener expects another security protocol (SASL_SSL, SSL, "
        "SASL_PLAINTEXT or PLAINTEXT)"
    )


def _untrusted(access: KafkaAccess, exc: ssl.SSLCertVerificationError) -> str:
    if exc.verify_code in HOSTNAME_MISMATCH_CODES:
        return (
            f"SCRAPESTREAM_KAFKA_BOOTSTRAP / SCRAPESTREAM_KAFKA_SSL_CHECK_HOSTNAME: the broker's certificate "
            f"does not name the host in {access.bootstrap} ({exc.verify_message}); connect by a name the "
            "certificate holds"
        )
    trusted = f"the CA in {access.ssl_ca_file}" if access.ssl_ca_file else "the system's CAs"
    return (
        f"SCRAPESTREAM_KAFKA_SSL_CA_FILE: the broker at {access.bootstrap} presented a certificate "
        f"{trusted} did not sign ({exc.verify_message}); set it to the CA that signed the brokers' "
        "certificates"
    )


def _tls_refused(access: KafkaAccess, exc: ssl.SSLError) -> str:
    reason = (exc.reason or str(exc)).upper()
    if any(alert in reason for alert in CERTIFICATE_ALERTS):
        return (
            f"{TLS_FILES}: the broker at {access.bootstrap} refused this client's certificate "
            f"({exc.reason}); mutual TLS needs a certificate signed by a CA the brokers trust"
        )
    return (
        f"{PROTOCOL}: the TLS handshake with {access.bootstrap} failed ({exc.reason}); its listener may "
        "not speak TLS (then PLAINTEXT or SASL_PLAINTEXT)"
    )


def _login_refused(access: KafkaAccess, exc: errors.KafkaError) -> str:
    return (
        "SCRAPESTREAM_KAFKA_SASL_USERNAME / SCRAPESTREAM_KAFKA_SASL_PASSWORD: the broker at "
        f"{access.bootstrap} refused the {access.sasl_mechanism} login of {access.sasl_username!r} "
        "(a wrong password, an unknown user, or a mechanism the user has no credential for)"
    )


DENIED_RESOURCES: dict[type[errors.KafkaError], str] = {
    errors.TopicAuthorizationFailedError: "a topic",
    errors.GroupAuthorizationFailedError: "the consumer group",
    errors.TransactionalIdAuthorizationFailed: "the transactional ids",
    errors.ClusterAuthorizationFailedError: "the cluster",
}


def denial(exc: BaseException, access: KafkaAccess, doing: str) -> KafkaAccessError | None:
    """A missing ACL as a `KafkaAccessError` naming the principal, what was being done and on what;
    None for any other error."""
    for kind, resource in DENIED_RESOURCES.items():
        if isinstance(exc, kind):
            who = access.principal or "this client's principal"
            return KafkaAccessError(
                f"{who} may not {doing} ({resource}: {exc}); grant it with "
                f"`scrapestream acls --role ROLE --principal {access.principal or 'User:NAME'} --apply` "
                "as an administrator, or check SCRAPESTREAM_KAFKA_SASL_USERNAME"
            )
    return None
