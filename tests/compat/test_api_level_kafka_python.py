"""The API level of a Kafka 4.0 broker, as kafka-python 3 sees it.

kafka-python infers a broker's version from the API versions it serves; ListOffsets v10 is
what tells 4.0 from 3.9. It then speaks ListOffsets v10, DescribeTopicPartitions v0 and
DescribeQuorum v2 to us.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.consumer.offsets import OffsetSpec

from tests.compat.clients import kafka_python_produce, new_topic, sample_messages


@pytest.fixture(scope="module")
def admin(kafka_bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    yield client
    client.close()


def test_kafka_python_infers_a_4_0_broker(kafka_bootstrap: str,
                                          admin: KafkaAdminClient) -> None:
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap)
    try:
        assert consumer.config["api_version"] == (4, 0)
    finally:
        consumer.close()
    [node] = [b["broker_id"] for b in admin.describe_cluster()["brokers"]]
    assert admin.get_broker_version_data(node).broker_version == (4, 0)


def test_list_offsets_v10_answers_every_offset_spec(kafka_bootstrap: str,
                                                     admin: KafkaAdminClient) -> None:
    topic = new_topic("kp-offsets")
    admin.create_topics([NewTopic(topic, 1, 1)])
    messages = sample_messages(5)  # a minute ago: within retention
    kafka_python_produce(kafka_bootstrap, topic, messages)
    tp = TopicPartition(topic, 0)

    answers = {spec: admin.list_partition_offsets({tp: spec})[tp] for spec in OffsetSpec}

    assert answers[OffsetSpec.EARLIEST].offset == 0
    assert answers[OffsetSpec.EARLIEST_LOCAL].offset == 0  # every segment is local
    assert answers[OffsetSpec.LATEST].offset == 5
    assert answers[OffsetSpec.LATEST_TIERED].offset == -1  # nothing is tiered
    assert answers[OffsetSpec.MAX_TIMESTAMP].offset == 4
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap)
    try:
        found = consumer.offsets_for_times({tp: messages[2].timestamp})[tp]
        assert found is not None and found.offset == 2
        assert consumer.end_offsets([tp])[tp] == 5
    finally:
        consumer.close()


def test_describe_topic_partitions_pages_with_a_cursor(admin: KafkaAdminClient) -> None:
    first, second = sorted([new_topic("kp-dtp-a"), new_topic("kp-dtp-b")])
    admin.create_topics([NewTopic(first, 3, 1), NewTopic(second, 2, 1)])
    missing = new_topic("kp-dtp-missing")
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while True:
        page = admin.describe_topic_partitions([second, first], response_partition_limit=2,
                                               cursor=cursor)
        pages += 1
        for topic in page["topics"]:
            assert topic["error_code"] == 0 and not topic["is_internal"]
            for p in topic["partitions"]:
                assert (p["leader_id"], p["isr_nodes"], p["error_code"]) == (1, [1], 0)
                seen.append((topic["name"], p["partition_index"]))
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == [(first, 0), (first, 1), (first, 2), (second, 0), (second, 1)]
    [unknown] = admin.describe_topic_partitions([missing])["topics"]
    assert unknown["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_describe_metadata_quorum_reports_the_single_voter(admin: KafkaAdminClient) -> None:
    quorum = admin.describe_metadata_quorum()
    [topic] = quorum["topics"]
    [partition] = topic["partitions"]
    assert topic["topic_name"] == "__cluster_metadata"
    assert partition["error"] is None
    assert partition["leader_id"] == 1 and partition["leader_epoch"] >= 1
    [voter] = partition["current_voters"]
    assert voter["replica_id"] == 1
    assert voter["log_end_offset"] >= partition["high_watermark"] > 0
    assert partition["observers"] == []
    # A lone broker with no CONTROLLER listener has no controller endpoint to name.
    assert quorum["nodes"] == []
