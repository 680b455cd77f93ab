"""A certificate authority made at run time, for a TLS broker on loopback and its clients' certificates.

Keys are EC P-256; everything is written as PEM (Kafka reads PEM key stores directly). A server
certificate names `localhost` and `127.0.0.1`; a client certificate's subject CN is its principal.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALID_FOR = datetime.timedelta(days=2)


def _name(common_name: str) -> x509.Name:
    return x509.Name(  # written "CN=…,O=test"
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "test"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _general(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


LOOPBACK = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class Issued:
    certificate: Path  # the certificate, then the CA's
    key: Path


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "scrapestream test CA") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self._certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.ca_file = directory / f"{name.replace(' ', '-')}.pem"
        self.ca_file.write_bytes(self._certificate.public_bytes(serialization.Encoding.PEM))

    def issue(self, common_name: str, *, names: tuple[str, ...] = ()) -> Issued:
        """A certificate for `common_name`; a server's names the hosts and addresses in `names`."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self._certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALID_FOR)
        )
        if names:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_general(n) for n in names]), critical=False
            )
        certificate = builder.sign(self._key, hashes.SHA256())
        chain = certificate.public_bytes(serialization.Encoding.PEM) + self.ca_file.read_bytes()
        stem = self.directory / common_name
        (key_path := stem.with_suffix(".key")).write_bytes(_key_pem(key))
        (certificate_path := stem.with_suffix(".crt")).write_bytes(chain)
        return Issued(certificate_path, key_path)

    def key_store(self, issued: Issued) -> Path:
        """One PEM file holding the key, then the certificate chain: Kafka's PEM key store."""
        path = issued.certificate.with_suffix(".pem")
        path.write_bytes(issued.key.read_bytes() + issued.certificate.read_bytes())
        return path
