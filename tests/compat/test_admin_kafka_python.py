"""kafka-python 3's KafkaAdminClient against the built-in broker.

kafka-python picks the highest version both sides know, so this covers CreateTopics v7,
DeleteTopics v6, DescribeConfigs v4, IncrementalAlterConfigs v1 and DescribeCluster v2.
"""

from __future__ import annotations

from collections.abc import Iterator

import kafka
import pytest
from kafka.admin import (
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewPartitions,
    NewTopic,
)
from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError

from tests.compat.clients import kafka_python_produce, new_topic, sample_messages


@pytest.fixture(scope="module")
def admin(kafka_bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    yield client
    client.close()


def topic_configs(admin: KafkaAdminClient, topic: str,
                  **kw: object) -> dict[str, dict[str, object]]:
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                       config_filter="all", **kw)
    configs: dict[str, dict[str, object]] = described["topic"][topic]
    return configs


def topic_names(admin: KafkaAdminClient) -> set[str]:
    return set(admin.list_topics())


def test_it_creates_a_topic_and_reports_its_configs(admin: KafkaAdminClient) -> None:
    topic = new_topic("kp-create")

    created = admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"retention.ms": "9000"})])

    [result] = created["topics"]
    assert (result["error_code"], result["num_partitions"], result["replication_factor"]) == \
        (0, 2, 1)
    # CreateTopics v5+: every config of the new topic, with its source.
    assert result["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert result["configs"]["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert topic in topic_names(admin)


def test_validate_only_and_duplicate_creation(admin: KafkaAdminClient) -> None:
    topic = new_topic("kp-validate")
    admin.create_topics([NewTopic(topic, 1, 1)], validate_only=True)
    assert topic not in topic_names(admin)

    admin.create_topics([NewTopic(topic, 1, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic, 1, 1)])


def test_it_deletes_topics(admin: KafkaAdminClient) -> None:
    topic = new_topic("kp-delete")
    admin.create_topics([NewTopic(topic, 1, 1)])

    deleted = admin.delete_topics([topic])

    assert [t["error_code"] for t in deleted["topics"]] == [0]
    assert topic not in topic_names(admin)


def test_it_creates_partitions(admin: KafkaAdminClient) -> None:
    topic = new_topic("kp-parts")
    admin.create_topics([NewTopic(topic, 1, 1)])

    response = admin.create_partitions({topic: NewPartitions(3)})

    # Tansu answered with no results at all; every topic must have one.
    assert [(r.name, r.error_code) for r in response.results] == [(topic, 0)]
    assert len(admin.describe_topics([topic])[0]["partitions"]) == 3
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({topic: NewPartitions(3)})


def test_describe_configs_with_synonyms_and_documentation(admin: KafkaAdminClient) -> None:
    topic = new_topic("kp-describe")
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"retention.ms": "1000"})])

    configs = topic_configs(admin, topic, include_synonyms=True)

    assert configs["retention.ms"]["synonyms"] == [
        {"name": "retention.ms", "value": "1000", "source": "DYNAMIC_TOPIC_CONFIG"},
        {"name": "log.retention.hours", "value": "168", "source": "DEFAULT_CONFIG"},
    ]
    assert configs["cleanup.policy"]["config_type"] == "LIST"
    assert configs["cleanup.policy"]["value"] == "delete"
    assert configs["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"


def test_describe_configs_of_the_broker(admin: KafkaAdminClient) -> None:
    described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")],
                                       config_filter="all")

    configs = described["broker"]["1"]
    assert configs["node.id"]["value"] == "1"
    assert configs["node.id"]["read_only"] is True
    assert configs["num.partitions"]["config_source"] == "DEFAULT_CONFIG"


def test_alter_configs_incremental_and_whole_set(admin: KafkaAdminClient) -> None:
    topic = new_topic("kp-alter")
    admin.create_topics([NewTopic(topic, 1, 1)])
    resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs={
        "cleanup.policy": (AlterConfigOp.APPEND, "compact"), "retention.ms": "5000"})

    assert admin.alter_configs([resource]) == {"topic": {topic: "OK"}}
    configs = topic_configs(admin, topic)
    assert configs["cleanup.policy"]["value"] == "delete,compact"
    assert configs["retention.ms"]["value"] == "5000"

    legacy = ConfigResource(ConfigResourceType.TOPIC, topic, configs={"segment.ms": "60000"})
    admin.alter_configs([legacy], incremental=False)
    configs = topic_configs(admin, topic)
    assert configs["segment.ms"]["value"] == "60000"
    # kafka-python re-sends the other dynamic keys, as AlterConfigs drops omitted ones.
    assert configs["retention.ms"]["value"] == "5000"


def test_delete_records_returns_the_low_watermark(admin: KafkaAdminClient,
                                                  kafka_bootstrap: str) -> None:
    topic = new_topic("kp-delrec")
    admin.create_topics([NewTopic(topic, 1, 1)])
    kafka_python_produce(kafka_bootstrap, topic, sample_messages(6))

    deleted = admin.delete_records({kafka.TopicPartition(topic, 0): 2})

    assert deleted[kafka.TopicPartition(topic, 0)]["low_watermark"] == 2
    consumer = kafka.KafkaConsumer(bootstrap_servers=kafka_bootstrap)
    try:
        tp = kafka.TopicPartition(topic, 0)
        assert consumer.beginning_offsets([tp])[tp] == 2
    finally:
        consumer.close()


def test_describe_cluster(admin: KafkaAdminClient, kafka_bootstrap: str) -> None:
    cluster = admin.describe_cluster()

    assert cluster["controller_id"] == 1
    assert cluster["cluster_id"]
    [broker] = cluster["brokers"]
    assert (broker["broker_id"], f"{broker['host']}:{broker['port']}") == (1, kafka_bootstrap)
