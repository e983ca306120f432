"""The whole broker security story with Kafka's own keys, as an operator meets it: one broker
whose only listener is SASL_SSL (SCRAM-SHA-512 and PLAIN), the StandardAuthorizer with
`super.users=User:admin`, `admin` bootstrapped with `--add-scram`. The admin creates the SCRAM
user `alice` over SASL_SSL with confluent-kafka's AdminClient; alice is refused to produce
and to consume until the admin grants her ACLs, then served; kcat reads a librdkafka
properties file (`-F`) and is served the same way."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.brokercore.security.certs import TestCA
from tests.brokerproc import BrokerProcess

ADMIN_PASSWORD = "admin-secret-512"
ALICE_PASSWORD = "alice-secret-512"
BOB_PASSWORD = "bob-plain-secret"  # a PLAIN user, from the listener's JAAS line


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    data_dir = tmp_path_factory.mktemp("secured-story")
    ca = TestCA(data_dir / "certs")
    server = ca.issue("broker", "localhost", "Millrace")
    process = BrokerProcess(data_dir, args=[
        f"--add-scram=SCRAM-SHA-512=[name=admin,password={ADMIN_PASSWORD}]"])
    process.overrides.update({
        "listeners": f"SECURE://127.0.0.1:{process.port}",
        "listener.security.protocol.map": "SECURE:SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        # The listener is also the inter-broker one (Kafka's default: the first), so it
        # names the broker's own login; one broker never uses it.
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.secure.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="broker" password="broker-secret" user_broker="broker-secret" '
            f'user_bob="{BOB_PASSWORD}";'),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(ca.keystore_pem(server)),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "offsets.topic.replication.factor": "1",
    })
    process.start()
    yield process, str(ca.ca_file)
    process.stop()


def config(broker: tuple[BrokerProcess, str], user: str, password: str,
           mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
    process, ca_file = broker
    return {"bootstrap.servers": process.bootstrap, "security.protocol": "SASL_SSL",
            "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": ca_file}


def produce(settings: dict[str, Any], topic: str, value: bytes) -> KafkaError | None:
    producer = confluent_kafka.Producer({**settings, "message.timeout.ms": 10000})
    reports: list[KafkaError | None] = []
    producer.produce(topic, value, on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(20)
    assert len(reports) == 1
    return reports[0]


def consume(settings: dict[str, Any], topic: str, group: str) -> confluent_kafka.Message:
    """The first message or error a subscribed consumer gets."""
    consumer = confluent_kafka.Consumer({**settings, "group.id": group,
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        for _ in range(40):
            message = consumer.poll(0.5)
            if message is not None:
                return message
        raise AssertionError("neither a record nor an error")
    finally:
        consumer.close()


def grant(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(30)


def allow(resource: ResourceType, name: str, principal: str, operation: AclOperation,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation,
                      AclPermissionType.ALLOW)


def test_admin_creates_alice_who_is_refused_until_granted(
        broker: tuple[BrokerProcess, str]) -> None:
    admin = AdminClient(config(broker, "admin", ADMIN_PASSWORD))
    topic, group = f"orders-{uuid.uuid4().hex[:8]}", f"billing-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    upsert = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
        ALICE_PASSWORD.encode())
    assert admin.alter_user_scram_credentials([upsert])["alice"].result(30) is None

    alice = config(broker, "alice", ALICE_PASSWORD)
    refused = produce(alice, topic, b"too early")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    refused_read = consume(alice, topic, group)
    assert refused_read.error() is not None
    assert refused_read.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    # alice may not grant herself anything: ALTER on the cluster is the admin's.
    own = AdminClient(alice)
    with pytest.raises(KafkaException) as denied:
        grant(own, allow(ResourceType.TOPIC, topic, "User:alice", AclOperation.ALL))
    assert denied.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    grant(admin, allow(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE),
          allow(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ),
          allow(ResourceType.GROUP, group, "User:alice", AclOperation.READ))
    value = uuid.uuid4().bytes
    assert produce(alice, topic, value) is None
    served = consume(alice, topic, group)
    assert served.error() is None and served.value() == value


def properties_file(path: Path, settings: dict[str, Any]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path


def kcat(properties: Path, *args: str, stdin: bytes | None = None
         ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["kcat", "-F", str(properties), *args], input=stdin,
                          capture_output=True, timeout=60)


def test_kcat_reads_a_properties_file_and_plain_users_are_authorized_too(
        broker: tuple[BrokerProcess, str], tmp_path: Path) -> None:
    admin = AdminClient(config(broker, "admin", ADMIN_PASSWORD))
    topic = f"team-bob-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    bob = properties_file(tmp_path / "bob.properties",
                          config(broker, "bob", BOB_PASSWORD, mechanism="PLAIN"))
    value = uuid.uuid4().hex

    refused = kcat(bob, "-P", "-t", topic, stdin=value.encode())
    assert b"authoriz" in refused.stderr.lower(), refused.stderr

    grant(admin, allow(ResourceType.TOPIC, "team-bob-", "User:bob", AclOperation.ALL,
                       ResourcePatternType.PREFIXED))
    produced = kcat(bob, "-P", "-t", topic, stdin=value.encode())
    assert produced.returncode == 0, produced.stderr
    read = kcat(bob, "-C", "-t", topic, "-o", "beginning", "-c", "1", "-e", "-J")
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout.splitlines()[0])["payload"] == value

    wrong = properties_file(tmp_path / "wrong.properties",
                            config(broker, "bob", "not-his", mechanism="PLAIN"))
    failed = kcat(wrong, "-L", "-m", "5")
    assert failed.returncode != 0
    assert b"Authentication failed" in failed.stderr or b"credentials" in failed.stderr, \
        failed.stderr
