"""Kafka 4.0 behaviours confluent-kafka's own integration suite checks, through confluent-kafka
over real sockets against one broker shared by the module.

Each test uses its own topic and group; nothing asserts a timing, the waits only bound a hang.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess

OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.min.session.timeout.ms": "1000",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(Path(tmp_path_factory.mktemp("kafka40-parity")), OVERRIDES).start()
    yield process
    process.kill()


def _topic(bootstrap: str, partitions: int = 1) -> str:
    topic = f"parity-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.create_topics([NewTopic(topic, partitions, 1)]).values()
    future.result(15)
    return topic


def test_a_consumer_protocol_client_commits_offsets_with_metadata_outside_any_assignment(
    broker: BrokerProcess,
) -> None:
    """confluent-kafka's test_consumer_topicpartition_metadata under group.protocol=consumer:
    a consumer that never subscribes commits again and again. librdkafka sends each commit
    with generation -1 and the member id it made itself (KIP-1082); the group holds offsets
    only, and Kafka takes such commits (it used to answer the second one UNKNOWN_MEMBER_ID)."""
    topic = _topic(broker.bootstrap)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": topic,
        "group.protocol": "consumer",
    })
    try:
        for offset, metadata in enumerate([None, "hello world", "नमस्ते दुनिया", ""], 1):
            tp = TopicPartition(topic, 0, offset) if metadata is None else \
                TopicPartition(topic, 0, offset, metadata)
            [committed] = consumer.commit(offsets=[tp], asynchronous=False)
            assert committed.error is None
            [read] = consumer.committed([TopicPartition(topic, 0)], timeout=15)
            assert (read.offset, read.metadata) == (offset, metadata)
    finally:
        consumer.close()
