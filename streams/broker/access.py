"""How every Kafka client of scrapestream reaches the cluster: its bootstrap, security protocol, SASL
login and TLS files. One value, made from the settings once and handed to the client factory; its
password never appears in a repr, a log line or an error."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import SecretStr

from streams.errors import UsageError

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


PROTOCOL = "SCRAPESTREAM_KAFKA_SECURITY_PROTOCOL"
TLS_FILES = "SCRAPESTREAM_KAFKA_SSL_CERT_FILE / SCRAPESTREAM_KAFKA_SSL_KEY_FILE"


class KafkaAccessError(UsageError):
    """The cluster refused this client's login, certificate or permissions; the message names the setting."""


@dataclass(frozen=True)
class KafkaAccess:
    bootstrap: str
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = field(default=None, repr=False)
    sasl_password_file: Path | None = None  # read at each client's start: a rotated password is used
    ssl_ca_file: Path | None = None
    ssl_cert_file: Path | None = None
    ssl_key_file: Path | None = None
    ssl_check_hostname: bool = True

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol.endswith("SSL")

    @property
    def principal(self) -> str | None:
        """The principal a SASL login names (`User:NAME`); None where the cluster derives it otherwise."""
        return f"User:{self.sasl_username}" if self.uses_sasl and self.sasl_username else None

    def client_options(self) -> dict[str, Any]:
        """aiokafka's connection options for this access."""
        options: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": self.security_protocol,
        }
        if self.uses_sasl:
            options["sasl_mechanism"] = self.sasl_mechanism
            options["sasl_plain_username"] = self.sasl_username
            options["sasl_plain_password"] = self.password()
        if self.uses_tls:
            options["ssl_context"] = self.ssl_context
        return options

    def password(self) -> str | None:
        if self.sasl_password_file is None:
            return self.sasl_password.get_secret_value() if self.sasl_password else None
        try:
            return self.sasl_password_file.read_text().strip()
        except OSError as exc:
            raise UsageError(
                f"SCRAPESTREAM_KAFKA_SASL_PASSWORD_FILE: cannot read {self.sasl_password_file}: "
                f"{exc.strerror}"
            ) from None

    def problems(self, *, password_from_file: bool = False) -> list[str]:
        """Each setting that contradicts another or names a file that is not there."""
        found = []
        if self.uses_sasl:
            missing = [
                name
                for name, value in (
                    ("SCRAPESTREAM_KAFKA_SASL_MECHANISM", self.sasl_mechanism),
                    ("SCRAPESTREAM_KAFKA_SASL_USERNAME", self.sasl_username),
                    ("SCRAPESTREAM_KAFKA_SASL_PASSWORD", self.sasl_password or password_from_file),
                )
                if not value
            ]
            if missing:
                found.append(f"{PROTOCOL}={self.security_protocol} needs {', '.join(missing)}")
        elif self.sasl_mechanism or self.sasl_username:
            found.append(
                f"SASL settings are set, but {PROTOCOL}={self.security_protocol} does not log in: set it "
                "to SASL_SSL (or SASL_PLAINTEXT)"
            )
        tls_files = (
            ("SCRAPESTREAM_KAFKA_SSL_CA_FILE", self.ssl_ca_file),
            ("SCRAPESTREAM_KAFKA_SSL_CERT_FILE", self.ssl_cert_file),
            ("SCRAPESTREAM_KAFKA_SSL_KEY_FILE", self.ssl_key_file),
        )
        given = [name for name, path in tls_files if path is not None]
        if given and not self.uses_tls:
            found.append(
                f"{', '.join(given)} set, but {PROTOCOL}={self.security_protocol} does not use TLS: "
                "set it to SSL or SASL_SSL"
            )
        if (self.ssl_cert_file is None) != (self.ssl_key_file is None):
            found.append(
                "mutual TLS needs both SCRAPESTREAM_KAFKA_SSL_CERT_FILE and SCRAPESTREAM_KAFKA_SSL_KEY_FILE"
            )
        found.extend(
            f"{name}: no file at {path}"
            for name, path in tls_files
            if path is not None and not path.is_file()
        )
        if self.sasl_password_file is not None and not self.sasl_password_file.is_file():
            found.append(f"SCRAPESTREAM_KAFKA_SASL_PASSWORD_FILE: no file at {self.sasl_password_file}")
        return found

    @cached_property
    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of every connection: the CA file's roots (else the system's), the client
        certificate for mutual TLS, hostname checks as set."""
        try:
            context = ssl.create_default_context(cafile=str(self.ssl_ca_file) if self.ssl_ca_file else None)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(
                f"SCRAPESTREAM_KAFKA_SSL_CA_FILE: cannot read {self.ssl_ca_file}: {exc}"
            ) from None
        context.check_hostname = self.ssl_check_hostname
        if self.ssl_cert_file is not None:
            try:
                context.load_cert_chain(
                    str(self.ssl_cert_file), str(self.ssl_key_file) if self.ssl_key_file else None
                )
            except (OSError, ssl.SSLError) as exc:
                raise UsageError(
                    f"{TLS_FILES}: cannot load the client certificate {self.ssl_cert_file}: {exc}"
                ) from None
        return context


def plaintext(bootstrap: str) -> KafkaAccess:
    """An open cluster's access (the embedded broker's, or a test's)."""
    return KafkaAccess(bootstrap)
