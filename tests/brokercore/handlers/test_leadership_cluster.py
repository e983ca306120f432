"""Leadership and reassignment admin calls on a real three-broker cluster, through
confluent-kafka's and kafka-python's admin clients, and each broker's metrics."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import kafka
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.brokerproc import ClusterProcess
from tests.cluster.faults import wait_until
from tests.compat.clients import confluent_consume, confluent_produce, new_topic, sample_messages


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    with ClusterProcess(Path(tmp_path_factory.mktemp("leadership")), brokers=3) as running:
        yield running


def create_topic(cluster: ClusterProcess, replicas: list[int]) -> str:
    name = new_topic("lead")
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = confluent_kafka.admin.NewTopic(name, num_partitions=1, replica_assignment=[replicas])
    admin.create_topics([new])[name].result(timeout=30)
    return name


def partition_state(cluster: ClusterProcess, topic: str) -> tuple[int, list[int], list[int]]:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    metadata = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
    return metadata.leader, list(metadata.replicas), list(metadata.isrs)


def fully_in_sync(cluster: ClusterProcess, topic: str, replicas: list[int]) -> bool | None:
    _, got, isr = partition_state(cluster, topic)
    return True if got == replicas and sorted(isr) == sorted(replicas) else None


def test_a_reordering_reassignment_then_a_preferred_election_moves_the_leader(
    cluster: ClusterProcess,
) -> None:
    topic = create_topic(cluster, [1, 2, 3])
    messages = sample_messages(5)
    confluent_produce(cluster.bootstrap, topic, messages, acks="all")
    wait_until("the ISR to fill", lambda: fully_in_sync(cluster, topic, [1, 2, 3]))

    admin = kafka.KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        results = admin.alter_partition_reassignments({kafka.TopicPartition(topic, 0): [2, 3, 1]})
    finally:
        admin.close()
    assert results == {kafka.TopicPartition(topic, 0): None}
    # The same set of replicas, so the reassignment is done at once; any broker answering
    # Metadata may still be applying it, as in Kafka, where metadata spreads asynchronously.
    wait_until("every broker to apply the reassignment",
               lambda: partition_state(cluster, topic)[:2] == (1, [2, 3, 1]))

    confluent_admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    tp = confluent_kafka.TopicPartition(topic, 0)
    elected = confluent_admin.elect_leaders(confluent_kafka.ElectionType.PREFERRED, [tp])
    assert [error for error in elected.result(timeout=30).values()] == [None]
    wait_until("broker 2 to lead", lambda: partition_state(cluster, topic)[0] == 2)
    assert [m.value for m in confluent_consume(cluster.bootstrap, topic, 5)] == [
        m.value for m in messages]


@pytest.mark.slow
def test_a_reassignment_moves_a_replica_and_completes_once_it_is_in_sync(
    cluster: ClusterProcess,
) -> None:
    topic = create_topic(cluster, [1, 2])
    messages = sample_messages(20)
    confluent_produce(cluster.bootstrap, topic, messages, acks="all")
    admin = kafka.KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        tp = kafka.TopicPartition(topic, 0)
        assert admin.alter_partition_reassignments({tp: [3, 2]}) == {tp: None}
        wait_until("the reassignment to complete",
                   lambda: admin.list_partition_reassignments([tp]) == {})
    finally:
        admin.close()
    # The controller has finished it; the broker answering Metadata may still be applying
    # the last records, as in Kafka, where metadata spreads asynchronously. The old leader
    # left, and 3 is first in the target: one answer must show all of it (each call may
    # reach another broker, so leader and replicas are read together).
    def moved() -> bool | None:
        leader, replicas, isr = partition_state(cluster, topic)
        return True if (leader, replicas, sorted(isr)) == (3, [3, 2], [2, 3]) else None

    wait_until("every broker to apply the finished reassignment, 3 leading", moved)
    assert [m.value for m in confluent_consume(cluster.bootstrap, topic, 20)] == [
        m.value for m in messages]


def test_exactly_one_broker_reports_itself_the_active_controller(cluster: ClusterProcess) -> None:
    def scrape(node_id: int) -> dict[str, float]:
        port = cluster.base_port + 200 + node_id - 1
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
        return {s.name: s.value for f in text_string_to_metric_families(text)
                for s in f.samples if not s.labels}

    scrapes = [scrape(node) for node in (1, 2, 3)]
    assert sum(s["kafka_controller_kafkacontroller_activecontrollercount"] for s in scrapes) == 1
    assert sum(s["kafka_controller_kafkacontroller_activebrokercount"] for s in scrapes) == 3
    assert all(s["kafka_server_replicamanager_partitioncount"] > 0 for s in scrapes)
