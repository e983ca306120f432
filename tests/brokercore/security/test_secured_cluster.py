"""A secured 3-broker cluster, configured with Kafka's own keys: clients on SASL_SSL,
replication on an inter-broker SASL_SSL listener logged in with SCRAM-SHA-512 (the users
made with --add-scram), the controller quorum on a SASL_SSL controller listener with PLAIN.
Under acks=all, kill -9 of the active controller loses nothing, a new one is elected over
the authenticated listener, and the restarted broker catches up into the ISR again."""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from brokercluster.ports import free_port
from brokercore.controller.wire import FrameError, encode_frame, read_frame
from brokercore.protocol.errors import ErrorCode
from tests.brokercore.security.certs import TestCA
from tests.brokerproc import BrokerProcess

SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="{user}" password="{password}";')
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="controller" password="quorum-secret" '
              'user_controller="quorum-secret";')
TOPIC = "replicated"


def _nodes(data_dir: Path) -> list[BrokerProcess]:
    ca = TestCA(data_dir / "certs")
    keystore = ca.keystore_pem(ca.issue("broker", "localhost", "Millrace"))
    nodes = [BrokerProcess(data_dir / f"broker-{i}", node_id=i, args=[
        "--add-scram=SCRAM-SHA-512=[name=broker,password=broker-secret]",
        "--add-scram=SCRAM-SHA-512=[name=client,password=client-secret]"]) for i in (1, 2, 3)]
    internal = {node.node_id: free_port() for node in nodes}
    controller = {node.node_id: free_port() for node in nodes}
    voters = ",".join(f"{i}@127.0.0.1:{port}" for i, port in controller.items())
    for node in nodes:
        i = node.node_id
        node.overrides.update({
            "listeners": f"CLIENT://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{internal[i]},"
                         f"CONTROLLER://127.0.0.1:{controller[i]}",
            "listener.security.protocol.map":
                "CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": voters,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.format(
                user="broker", password="broker-secret"),
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.ca_file),
            "default.replication.factor": "3",
            "min.insync.replicas": "2",
            "offsets.topic.replication.factor": "3",
            "replica.lag.time.max.ms": "5000",
        })
    return nodes


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProcess]]:
    nodes = _nodes(tmp_path_factory.mktemp("secured-cluster"))
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda node: node.start(60), nodes))
    yield nodes
    for node in nodes:
        node.stop()


def _client(nodes: list[BrokerProcess]) -> dict[str, str]:
    return {"bootstrap.servers": ",".join(n.bootstrap for n in nodes),
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(nodes[0].data_dir.parent / "certs" / "ca.crt"),
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "client",
            "sasl.password": "client-secret"}


def _isr(admin: AdminClient) -> list[int]:
    partition = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
    return sorted(partition.isrs)


def _wait_for(condition: object, what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if condition():  # type: ignore[operator]
                return
        except (confluent_kafka.KafkaException, TimeoutError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"not within {limit} s: {what}")


def _produce(nodes: list[BrokerProcess], values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({**_client(nodes), "acks": "all",
                                         "enable.idempotence": True})
    failed: list[object] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            failed.append(error)

    for value in values:
        producer.produce(TOPIC, value, on_delivery=delivered)
    assert producer.flush(60) == 0 and not failed, failed


def test_it_replicates_and_fails_over_over_authenticated_listeners(
        cluster: list[BrokerProcess]) -> None:
    admin = AdminClient(_client(cluster))
    admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result(30)
    _wait_for(lambda: _isr(admin) == [1, 2, 3], "every replica in the ISR")
    first = [uuid.uuid4().bytes for _ in range(100)]
    _produce(cluster, first)

    controller_id = admin.list_topics(timeout=10).controller_id
    victim = next(node for node in cluster if node.node_id == controller_id)
    victim.kill()
    survivors = [node for node in cluster if node is not victim]
    survivor_admin = AdminClient(_client(survivors))
    _wait_for(lambda: survivor_admin.list_topics(timeout=5).controller_id
              not in (-1, controller_id), "a new active controller")
    second = [uuid.uuid4().bytes for _ in range(100)]
    _produce(survivors, second)

    victim.start(60)
    _wait_for(lambda: _isr(admin) == [1, 2, 3], "the restarted broker back in the ISR")
    consumer = confluent_kafka.Consumer({**_client(cluster), "group.id": uuid.uuid4().hex,
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    read: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(read) < len(first) + len(second) and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            read.append(message.value())
    consumer.close()
    assert read == first + second
    for node in cluster:
        assert "refused our credentials" not in node.log()
        assert "SASL:" not in node.log()


def _controller_port(node: BrokerProcess) -> int:
    listener = node.overrides["listeners"].split(",")[-1]
    assert listener.startswith("CONTROLLER://")
    return int(listener.rsplit(":", 1)[1])


async def _controller_session(node: BrokerProcess, frames: list[dict[str, object]]
                              ) -> list[dict[str, object] | None]:
    """Each frame's answer on one TLS connection to the node's controller listener; None
    once the listener has closed it."""
    context = ssl.create_default_context(
        cafile=str(node.data_dir.parent / "certs" / "ca.crt"))
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", _controller_port(node), ssl=context, server_hostname="localhost")
    answers: list[dict[str, object] | None] = []
    try:
        for frame in frames:
            try:
                writer.write(encode_frame(frame))
                await writer.drain()
                answers.append(await asyncio.wait_for(read_frame(reader), 10))
            except (ConnectionError, FrameError):
                answers.append(None)
    finally:
        writer.close()
    return answers


def test_the_controller_listener_wants_a_login_first(cluster: list[BrokerProcess]) -> None:
    node = cluster[0]
    raft = {"raft": {"type": "vote_request"}, "from": 2}
    answers = asyncio.run(_controller_session(node, [raft, raft]))
    assert answers[0] is not None and answers[0]["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
    assert answers[1] is None
    wrong = base64.b64encode(b"\0controller\0wrong").decode()
    answers = asyncio.run(_controller_session(node, [
        {"sasl_handshake": "PLAIN"}, {"sasl_authenticate": wrong}, raft]))
    assert answers[0] == {"error_code": 0, "mechanisms": ["PLAIN"]}
    assert answers[1] is not None
    assert answers[1]["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answers[2] is None
    assert "controller listener: closing a connection: SASL" in node.log()
