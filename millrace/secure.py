"""`manage.py platform --secure`: the built-in cluster's CA, certificates, credentials and
client configs, made once under the data dir and kept across restarts (README, "A secured
platform").

Everything lives in `<data dir>/secure/` (mode 0700):

- `ca.crt`, `ca.key`: the platform's own CA (EC P-256, ten years).
- `broker.pem`: the brokers' key, certificate (SANs localhost and 127.0.0.1) and the CA,
  one PEM file (`ssl.keystore.type=PEM`).
- `http.pem`: the same for the HTTPS ports of the registry, the REST proxy and the Connect
  worker (MILLRACE_HTTP_TLS_CERT, the worker's `listeners.https.ssl.keystore.location`;
  SANs localhost, 127.0.0.1 and this machine's name).
- `credentials.json` (0600): the passwords the platform made: `broker` (the brokers' own
  PLAIN login, inter-broker and controller), `millrace` (the platform's services) and
  `admin` (SCRAM-SHA-512, created with `--add-scram` on the cluster's first start).
- `service.properties`: the librdkafka config of the platform's own clients
  (`MILLRACE_KAFKA_CLIENT_CONFIG`), `client.properties`: the admin's, the endpoint table's
  `Client config` line. Both carry a password: 0600. With `--clusters N` each other
  built-in cluster has its own pair, `service-<name>.properties` and
  `client-<name>.properties` (its `Client config (<name>)` line).

Every built-in cluster (`--clusters N`) is secured with these same files: one CA, so one
`ssl.ca.location` trusts every cluster; one broker certificate, valid for each since they all
listen on 127.0.0.1; and the same passwords, so the admin's, printed once, logs in to every
cluster, and the REST proxy, which checks a caller's Basic login on the default cluster, can
reach each other cluster as that caller (restproxy/README.md). Users and ACLs made later are
each cluster's own (they live in its metadata log).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from clusterclient import ClusterClient, ClusterRequestError, ClusterUnavailable, security

# Each broker's Kafka listener (clients and brokers alike) and its controller listener.
KAFKA_LISTENER = "CLIENT"
# The platform's services (control center, collector, REST proxy, Celery jobs) log in as
# this PLAIN user; the brokers as `broker`. Both are super users.
SERVICE_USER = "millrace"
BROKER_USER = "broker"
ADMIN_USER = "admin"
# The platform's own principals: the Security pages refuse to change their credentials.
SERVICE_PRINCIPALS = (BROKER_USER, SERVICE_USER)
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
VALIDITY = datetime.timedelta(days=3650)


@dataclass(frozen=True)
class SecureFiles:
    """The secured platform's files under `directory`; `admin_password_new` is the admin's
    password when this start made it (printed once), else None."""

    directory: Path
    passwords: dict[str, str]
    admin_password_new: str | None

    @classmethod
    def ensure(cls, data_dir: Path) -> SecureFiles:
        directory = data_dir / "secure"
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        if not (directory / "ca.crt").exists():
            _write_ca(directory)
        if not (directory / "broker.pem").exists():
            _write_server_keystore(directory, "broker.pem", "millrace-broker")
        if not (directory / "http.pem").exists():
            _write_server_keystore(directory, "http.pem", "millrace-http",
                                   socket.gethostname())
        credentials = directory / "credentials.json"
        new_admin = None
        if credentials.exists():
            passwords = json.loads(credentials.read_text())
        else:
            passwords = {user: secrets.token_urlsafe(18)
                         for user in (BROKER_USER, SERVICE_USER, ADMIN_USER)}
            _write_private(credentials, json.dumps(passwords, indent=2) + "\n")
            new_admin = passwords[ADMIN_USER]
        return cls(directory, passwords, new_admin)

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def http_keystore(self) -> Path:
        """Key, certificate and CA of the HTTPS ports (registry, proxy, Connect), one PEM
        file."""
        return self.directory / "http.pem"

    def add_scram(self) -> list[str]:
        """`--add-scram` for the cluster's first start (ignored once it has a cluster id):
        the admin, and the services' user, which also logs in to the HTTP APIs that check
        the cluster's SCRAM users (the Connect worker's REST API; `ensure_service_scram`
        adds it to a cluster formatted before it was here)."""
        return [f"SCRAM-SHA-512=[name={user},password={self.passwords[user]}]"
                for user in (ADMIN_USER, SERVICE_USER)]

    def ensure_service_scram(self, bootstrap: str) -> bool:
        """The services' SCRAM-SHA-512 credential in place (made now if the cluster lacks
        it); False while the cluster does not answer."""
        config = self.client_config(bootstrap, SERVICE_USER, "PLAIN")
        client = ClusterClient(config.pop("bootstrap.servers"), config, timeout=10)
        try:
            try:
                users = security.describe_scram_users(client, [SERVICE_USER])
            except ClusterRequestError as exc:
                if exc.code_name != "RESOURCE_NOT_FOUND":
                    raise
                users = []
            if not any(c.mechanism == "SCRAM-SHA-512" for u in users for c in u.credentials):
                security.upsert_scram_credential(client, SERVICE_USER, "SCRAM-SHA-512",
                                                 self.passwords[SERVICE_USER], 8192)
            return True
        except (ClusterUnavailable, ClusterRequestError):
            return False

    def broker_config(self) -> dict[str, str]:
        """Kafka keys for every broker: SASL_SSL only, the authorizer, the super users."""
        jaas = (f'{PLAIN_MODULE} required username="{BROKER_USER}" '
                f'password="{self.passwords[BROKER_USER]}" '
                f'user_{BROKER_USER}="{self.passwords[BROKER_USER]}" '
                f'user_{SERVICE_USER}="{self.passwords[SERVICE_USER]}";')
        return {
            "listener.security.protocol.map": f"{KAFKA_LISTENER}:SASL_SSL,CONTROLLER:SASL_SSL",
            "inter.broker.listener.name": KAFKA_LISTENER,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            # PLAIN between brokers and in the quorum: SCRAM credentials live in the
            # metadata log, which the quorum has to form first (brokercore/security).
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            f"listener.name.{KAFKA_LISTENER.lower()}.plain.sasl.jaas.config": jaas,
            "listener.name.controller.plain.sasl.jaas.config": jaas,
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.directory / "broker.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{BROKER_USER};User:{SERVICE_USER};User:{ADMIN_USER}",
        }

    def client_config(self, bootstrap: str, user: str, mechanism: str) -> dict[str, str]:
        return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanisms": mechanism, "sasl.username": user,
                "sasl.password": self.passwords[user], "ssl.ca.location": str(self.ca_file)}

    def write_client_configs(self, bootstrap: str, cluster: str | None = None
                             ) -> tuple[Path, Path]:  # fmt: skip
        """(the services' properties file, the admin's) for the built-in cluster at
        `bootstrap`: librdkafka's keys, which `kcat -F` and confluent-kafka read. `cluster`:
        another built-in cluster's name (`--clusters N`), whose files are
        `service-<name>.properties` and `client-<name>.properties`."""
        suffix = "" if cluster is None else f"-{cluster}"
        service = self.directory / f"service{suffix}.properties"
        admin = self.directory / f"client{suffix}.properties"
        _write_private(service, _properties(self.client_config(bootstrap, SERVICE_USER,
                                                               "PLAIN")))
        _write_private(admin, _properties(self.client_config(bootstrap, ADMIN_USER,
                                                             "SCRAM-SHA-512")))
        return service, admin


def _properties(config: dict[str, str]) -> str:
    return "# Millrace platform --secure: librdkafka client config (kcat -F, confluent-kafka)\n" \
        + "".join(f"{key}={value}\n" for key, value in config.items())


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    path.chmod(0o600)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Millrace"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_ca(directory: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name("Millrace platform CA")
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    _write_private(directory / "ca.key", _key_pem(key).decode())
    (directory / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "ca.crt").chmod(0o644)  # public: clients read it (ssl.ca.location)
    (directory / "broker.pem").unlink(missing_ok=True)  # a new CA: new server certs
    (directory / "http.pem").unlink(missing_ok=True)


def _write_server_keystore(directory: Path, filename: str, common_name: str,
                           *extra_names: str) -> None:
    ca_pem = (directory / "ca.crt").read_bytes()
    ca_cert = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = [
        x509.DNSName(n) for n in dict.fromkeys(("localhost", *extra_names)) if n]
    cert = (x509.CertificateBuilder().subject_name(_name(common_name))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.SubjectAlternativeName([
                *names, x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([
                x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
                x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write_private(directory / filename, (
        _key_pem(key) + cert.public_bytes(serialization.Encoding.PEM) + ca_pem).decode())
