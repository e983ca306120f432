"""A broker process with every security protocol on its own listener, for the security
tests: PLAINTEXT (to set things up), SASL_PLAINTEXT, SASL_SSL (PLAIN users from the JAAS
lines, SCRAM users from --add-scram), and SSL with client certificates required (mTLS).
Its CA and certificates are made with `cryptography` (`tests/brokercore/security/certs.py`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from brokercluster.ports import free_port
from tests.brokercore.security.certs import Pair, TestCA
from tests.brokerproc import REPO, BrokerProcess, PortTaken

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_USERS = {"SCRAM-SHA-256": ("scram256", "s256-secret"),
               "SCRAM-SHA-512": ("scram512", "s512-secret")}
CREDENTIALS = {"PLAIN": ("alice", "alice-secret"), **SCRAM_USERS}


def plain_jaas(users: dict[str, str]) -> str:
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="admin" password="admin-secret" {entries};')


@dataclass
class SecuredBroker:
    process: BrokerProcess
    ca: TestCA
    ports: dict[str, int]
    client: Pair  # signed by the CA: CN=alice,O=Example
    stranger: Pair  # self-signed: the broker must refuse it
    expired: Pair  # signed by the CA, but no longer valid

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    @property
    def ca_file(self) -> str:
        return str(self.ca.ca_file)


def start_secured_broker(data_dir: Path, overrides: dict[str, str] | None = None,
                         tree: Path = REPO) -> SecuredBroker:
    """A broker with a listener of each security protocol. Its four ports are found free
    before the broker binds them, and in between another process's outgoing connection can
    take one of them from the ephemeral range (a -n 3 rehearsal: "address already in use"):
    then it starts again, on four other ports, in a directory of its own."""
    directories = [data_dir, data_dir / "retry-1", data_dir / "retry-2"]
    for directory in directories[:-1]:
        with contextlib.suppress(PortTaken):
            return _start_secured_broker(directory, overrides, tree)
    return _start_secured_broker(directories[-1], overrides, tree)


def _start_secured_broker(data_dir: Path, overrides: dict[str, str] | None,
                          tree: Path) -> SecuredBroker:
    ca = TestCA(data_dir / "certs")
    server = ca.issue("broker", "localhost", "Millrace")
    process = BrokerProcess(data_dir, args=[
        f"--add-scram={mechanism}=[name={user},password={password}]"
        for mechanism, (user, password) in SCRAM_USERS.items()], tree=tree)
    ports = {"PLAINTEXT": process.port, "SASL_PLAINTEXT": free_port(), "SASL_SSL": free_port(),
             "SSL": free_port()}
    process.overrides.update({
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(ca.keystore_pem(server)),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.ca_file),
        "listener.name.ssl.ssl.client.auth": "required",
        "offsets.topic.replication.factor": "1",
        **(overrides or {}),
    })
    process.start()
    return SecuredBroker(process, ca, ports, ca.issue("alice", "alice"),
                         ca.issue("stranger", "stranger", self_signed=True),
                         ca.issue("expired", "alice", expired=True))
