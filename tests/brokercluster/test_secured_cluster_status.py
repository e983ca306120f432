"""`python -m brokercluster --kafka-listener CLIENT` with a secured protocol map: every
broker's Kafka listener is SASL_SSL (also the inter-broker one), the quorum SASL_SSL with
PLAIN, the authorizer on. `status` still sees every broker and every topic, because its
probe logs in as the brokers log in to each other; a plaintext client gets nothing, and a
SCRAM client that the JAAS lines never named is served once granted."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokercore.security.certs import TestCA
from tests.brokerproc import ClusterProcess

BROKER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'username="broker" password="broker-secret" user_broker="broker-secret";')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClusterProcess, Path]]:
    data_dir = tmp_path_factory.mktemp("secured-status")
    ca = TestCA(data_dir / "certs")
    keystore = ca.keystore_pem(ca.issue("broker", "localhost", "Millrace"))
    process = ClusterProcess(data_dir / "cluster", brokers=2, args=[
        "--kafka-listener", "CLIENT",
        "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]"], overrides={
        "listener.security.protocol.map": "CLIENT:SASL_SSL,CONTROLLER:SASL_SSL",
        "inter.broker.listener.name": "CLIENT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.client.plain.sasl.jaas.config": BROKER_JAAS,
        "listener.name.controller.plain.sasl.jaas.config": BROKER_JAAS,
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.ca_file),
        "authorizer.class.name": "StandardAuthorizer",
        "super.users": "User:broker;User:admin",
        "offsets.topic.replication.factor": "2",
    })
    with process:
        yield process, ca.ca_file


def test_status_sees_every_broker_and_topic_through_the_secured_listener(
        cluster: tuple[ClusterProcess, Path]) -> None:
    process, ca_file = cluster
    admin = AdminClient({"bootstrap.servers": process.bootstrap, "security.protocol": "SASL_SSL",
                         "ssl.ca.location": str(ca_file), "sasl.mechanisms": "SCRAM-SHA-512",
                         "sasl.username": "admin", "sasl.password": "admin-secret"})
    topic = f"secured-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30)
    status = process.status()
    assert [(b["id"], b["state"], b["sees"]) for b in status["brokers"]] == [
        (1, "running", [1, 2]), (2, "running", [1, 2])], status
    # Each broker counts the leaderships it has applied: the new topic's reach both soon.
    deadline = time.monotonic() + 30
    while sum(b["leaders"] for b in status["brokers"]) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
        status = process.status()
    assert sum(b["leaders"] for b in status["brokers"]) >= 2, status


def test_a_plaintext_client_gets_nothing(cluster: tuple[ClusterProcess, Path]) -> None:
    process, _ = cluster
    errors: list[confluent_kafka.KafkaError] = []
    plain = AdminClient({"bootstrap.servers": process.bootstrap, "error_cb": errors.append,
                         "socket.timeout.ms": 2000})
    with pytest.raises(confluent_kafka.KafkaException):
        plain.list_topics(timeout=3)
    # What a plaintext request gets: the listener waits for a TLS hello, so no Kafka answer.
    with socket.create_connection(("127.0.0.1", process.base_port), timeout=5) as raw:
        raw.sendall(b"\x00\x00\x00\x0b\x00\x12\x00\x00\x00\x00\x00\x01\x00\x01x")
        raw.settimeout(3)
        try:
            answer = raw.recv(100)
        except TimeoutError:
            answer = b""
    assert not answer.startswith(b"\x00\x00\x00")
