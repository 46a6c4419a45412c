"""Test certificates: a CA and leaf certificates made in the test, never shipped."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class CA:
    def __init__(self, cn: str = "lychgate test CA") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, cn: str, sans: list[str]) -> tuple[bytes, bytes]:
        """(certificate PEM, key PEM) for names, IP addresses and URIs in sans."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        alt: list[x509.GeneralName] = []
        for san in sans:
            if "://" in san:  # a URI SAN (spiffe://...)
                alt.append(x509.UniformResourceIdentifier(san))
                continue
            try:
                alt.append(x509.IPAddress(ipaddress.ip_address(san)))
            except ValueError:
                alt.append(x509.DNSName(san))
        cert = (
            x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(self.cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)

    def write_tls_dir(self, directory: Path, cn: str, sans: list[str]) -> Path:
        """The layout of a kubernetes.io/tls Secret with ca.crt, as a directory."""
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = self.issue(cn, sans)
        (directory / "tls.crt").write_bytes(cert)
        (directory / "tls.key").write_bytes(key)
        (directory / "ca.crt").write_bytes(self.pem)
        return directory
