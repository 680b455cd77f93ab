"""What makes a `KafkaCluster` node secured, as production clusters are: SASL_SSL with SCRAM-SHA-512
for clients, a second listener (`MTLS`) that takes only client certificates (the principal is the
certificate's CN), the StandardAuthorizer denying whatever no ACL allows, and SCRAM users made
when the storage is formatted. Only `admin` (the brokers' own login) is a super user.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from bench.certificates import LOOPBACK, CertificateAuthority
from streams.broker.access import KafkaAccess, SaslMechanism

ADMIN = "admin"
MECHANISM: SaslMechanism = "SCRAM-SHA-512"


@dataclass
class Secured:
    ca: CertificateAuthority
    users: dict[str, str] = field(default_factory=dict)  # name -> password; `admin` is added

    def __post_init__(self) -> None:
        self.users.setdefault(ADMIN, secrets.token_urlsafe(16))

    @classmethod
    def made_in(cls, directory: Path, *users: str) -> Secured:
        return cls(
            CertificateAuthority(directory / "ca"), {user: secrets.token_urlsafe(16) for user in users}
        )

    def properties(self, port: int, mtls_port: int, controller_port: int) -> dict[str, str]:
        key_store = self.ca.key_store(self.ca.issue("broker", names=LOOPBACK))
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN}" password="{self.users[ADMIN]}";'
        )
        return {
            "listeners": (
                f"SASL_SSL://127.0.0.1:{port},MTLS://127.0.0.1:{mtls_port},CONTROLLER://127.0.0.1:{controller_port}"
            ),
            "advertised.listeners": f"SASL_SSL://127.0.0.1:{port},MTLS://127.0.0.1:{mtls_port}",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,MTLS:SSL,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config": jaas,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(key_store),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca.ca_file),
            "listener.name.mtls.ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^.*CN=([^,]+).*$/$1/,DEFAULT",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{ADMIN};User:ANONYMOUS",  # ANONYMOUS: the controller listener's own traffic
        }

    def format_arguments(self) -> list[str]:
        arguments = []
        for name, password in self.users.items():
            arguments += ["--add-scram", f"{MECHANISM}=[name={name},password={password}]"]
        return arguments

    def access(self, bootstrap: str, user: str = ADMIN, password: str | None = None) -> KafkaAccess:
        """A SCRAM login of `user` (its own password unless another is given) over TLS."""
        return KafkaAccess(
            bootstrap,
            "SASL_SSL",
            MECHANISM,
            user,
            SecretStr(self.users[user] if password is None else password),
            ssl_ca_file=self.ca.ca_file,
        )

    def settings(self, user: str) -> dict[str, object]:
        """The `SCRAPESTREAM_KAFKA_*` settings (as `load_settings` keywords) of `user`'s login."""
        return {
            "kafka_security_protocol": "SASL_SSL",
            "kafka_sasl_mechanism": MECHANISM,
            "kafka_sasl_username": user,
            "kafka_sasl_password": self.users[user],
            "kafka_ssl_ca_file": self.ca.ca_file,
        }
