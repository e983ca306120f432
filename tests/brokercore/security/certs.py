"""A test CA and certificates made with `cryptography`: a broker certificate with SANs for
localhost and 127.0.0.1 (librdkafka and Python's ssl check the host name), client
certificates signed by the CA, and a self-signed one the CA never saw."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path

    def pem(self) -> tuple[str, str]:
        return self.cert.read_text(), self.key.read_text()


def _name(common_name: str, organization: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(directory: Path, stem: str, cert: x509.Certificate,
           key: ec.EllipticCurvePrivateKey) -> Pair:
    cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return Pair(cert_path, key_path)


class TestCA:
    __test__ = False  # not a pytest class

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = _name("Millrace Test CA", "Millrace")
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256()))
        self.pair = _write(directory, "ca", self.cert, self.key)

    @property
    def ca_file(self) -> Path:
        return self.pair.cert

    def issue(self, stem: str, common_name: str, organization: str = "Example",
              self_signed: bool = False, expired: bool = False) -> Pair:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(common_name, organization)
        now = datetime.datetime.now(datetime.UTC)
        if expired:  # valid for two days that ended yesterday
            now -= datetime.timedelta(days=3)
        builder = (
            x509.CertificateBuilder().subject_name(subject)
            .issuer_name(subject if self_signed else self.name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False))
        cert = builder.sign(key if self_signed else self.key, hashes.SHA256())
        return _write(self.directory, stem, cert, key)

    def pkcs12(self, pair: Pair, password: str) -> Path:
        cert = x509.load_pem_x509_certificate(pair.cert.read_bytes())
        key = serialization.load_pem_private_key(pair.key.read_bytes(), None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        path = pair.cert.with_suffix(".p12")
        path.write_bytes(pkcs12.serialize_key_and_certificates(
            b"broker", key, cert, [self.cert],
            serialization.BestAvailableEncryption(password.encode())))
        return path

    def keystore_pem(self, pair: Pair) -> Path:
        """One PEM file with the key and the chain (ssl.keystore.type=PEM, location)."""
        path = pair.cert.with_suffix(".keystore.pem")
        path.write_text(pair.key.read_text() + pair.cert.read_text() + self.ca_file.read_text())
        return path
