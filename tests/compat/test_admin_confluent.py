"""confluent-kafka's AdminClient (librdkafka) against the built-in broker."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from tests.compat.clients import confluent_produce, new_topic, sample_messages

TIMEOUT = 15
# AlterConfigs is deprecated in favour of IncrementalAlterConfigs, but clients still send it.
pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")


@pytest.fixture(scope="module")
def admin(kafka_bootstrap: str) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": kafka_bootstrap})


def result(futures: dict[Any, Future[Any]]) -> Any:
    [future] = futures.values()
    return future.result(TIMEOUT)


def error_of(futures: dict[Any, Future[Any]]) -> confluent_kafka.KafkaError:
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        result(futures)
    error: confluent_kafka.KafkaError = raised.value.args[0]
    return error


def topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    configs: dict[str, ConfigEntry] = result(
        admin.describe_configs([ConfigResource("topic", topic)]))
    return configs


def partition_count(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions)


def test_it_creates_a_topic_with_partitions_and_config_overrides(admin: AdminClient) -> None:
    topic = new_topic("cf-create")
    result(admin.create_topics([NewTopic(topic, 3, 1, config={"retention.ms": "3600000"})]))

    assert partition_count(admin, topic) == 3
    configs = topic_configs(admin, topic)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def test_validate_only_creates_nothing(admin: AdminClient) -> None:
    topic = new_topic("cf-validate")
    result(admin.create_topics([NewTopic(topic, 2, 1)], validate_only=True))

    assert topic not in admin.list_topics(timeout=TIMEOUT).topics


def test_it_refuses_an_existing_topic_and_bad_requests(admin: AdminClient) -> None:
    topic = new_topic("cf-exists")
    result(admin.create_topics([NewTopic(topic, 1, 1)]))

    assert error_of(admin.create_topics([NewTopic(topic, 1, 1)])).code() == \
        confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS
    too_many = admin.create_topics([NewTopic(new_topic("cf-rf"), 1, 3)])
    assert error_of(too_many).code() == confluent_kafka.KafkaError.INVALID_REPLICATION_FACTOR
    bad_config = admin.create_topics([NewTopic(new_topic("cf-cfg"), 1, 1,
                                               config={"retention.ms": "soon"})])
    assert error_of(bad_config).code() == confluent_kafka.KafkaError.INVALID_CONFIG


def test_it_deletes_a_topic(admin: AdminClient) -> None:
    topic = new_topic("cf-delete")
    result(admin.create_topics([NewTopic(topic, 1, 1)]))

    result(admin.delete_topics([topic]))

    assert topic not in admin.list_topics(timeout=TIMEOUT).topics
    assert error_of(admin.delete_topics([topic])).code() == \
        confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_it_adds_partitions_and_validate_only_adds_none(admin: AdminClient) -> None:
    topic = new_topic("cf-parts")
    result(admin.create_topics([NewTopic(topic, 1, 1)]))

    result(admin.create_partitions([NewPartitions(topic, 4)], validate_only=True))
    assert partition_count(admin, topic) == 1
    result(admin.create_partitions([NewPartitions(topic, 4)]))
    assert partition_count(admin, topic) == 4
    shrink = admin.create_partitions([NewPartitions(topic, 2)])
    assert error_of(shrink).code() == confluent_kafka.KafkaError.INVALID_PARTITIONS


def test_describe_configs_lists_every_default_with_its_source(admin: AdminClient) -> None:
    topic = new_topic("cf-describe")
    result(admin.create_topics([NewTopic(topic, 1, 1)]))

    configs = topic_configs(admin, topic)

    # Tansu's finding: the defaults must be there, not just the overrides.
    assert {"cleanup.policy", "retention.ms", "segment.bytes", "max.message.bytes",
            "min.insync.replicas"} <= set(configs)
    assert configs["cleanup.policy"].value == "delete"
    assert configs["retention.ms"].value == "604800000"
    assert all(not entry.is_read_only for entry in configs.values())
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["retention.ms"].is_default


def test_describe_configs_of_the_broker(admin: AdminClient) -> None:
    configs: dict[str, ConfigEntry] = result(
        admin.describe_configs([ConfigResource("broker", "1")]))

    assert configs["node.id"].value == "1"
    assert configs["node.id"].is_read_only
    assert configs["log.retention.hours"].value == "168"
    # The test broker's overrides are static broker configs.
    assert configs["offsets.topic.num.partitions"].source == \
        ConfigSource.STATIC_BROKER_CONFIG.value


def test_describe_configs_of_an_unknown_topic_fails(admin: AdminClient) -> None:
    missing = admin.describe_configs([ConfigResource("topic", new_topic("cf-missing"))])
    assert error_of(missing).code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_alter_configs_replaces_every_override(admin: AdminClient) -> None:
    topic = new_topic("cf-alter")
    result(admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "1000"})]))

    result(admin.alter_configs([ConfigResource("topic", topic,
                                                set_config={"segment.ms": "60000"})]))

    configs = topic_configs(admin, topic)
    assert configs["segment.ms"].value == "60000"
    assert configs["retention.ms"].value == "604800000"  # back to the default
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_incremental_alter_configs_sets_appends_subtracts_and_deletes(
    admin: AdminClient,
) -> None:
    topic = new_topic("cf-incr")
    result(admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "1000"})]))

    def alter(*entries: ConfigEntry) -> None:
        result(admin.incremental_alter_configs(
            [ConfigResource("topic", topic, incremental_configs=list(entries))]))

    alter(ConfigEntry("cleanup.policy", "compact",
                      incremental_operation=AlterConfigOpType.APPEND),
          ConfigEntry("segment.ms", "120000", incremental_operation=AlterConfigOpType.SET))
    configs = topic_configs(admin, topic)
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["retention.ms"].value == "1000"  # untouched, unlike AlterConfigs
    assert configs["segment.ms"].value == "120000"

    alter(ConfigEntry("cleanup.policy", "delete",
                      incremental_operation=AlterConfigOpType.SUBTRACT),
          ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE))
    configs = topic_configs(admin, topic)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "604800000"


def test_alter_configs_validate_only_changes_nothing(admin: AdminClient) -> None:
    topic = new_topic("cf-alter-validate")
    result(admin.create_topics([NewTopic(topic, 1, 1)]))

    result(admin.alter_configs(
        [ConfigResource("topic", topic, set_config={"retention.ms": "5000"})],
        validate_only=True))

    assert topic_configs(admin, topic)["retention.ms"].value == "604800000"
    bad = admin.alter_configs([ConfigResource("topic", topic, set_config={"no.such": "1"})])
    assert error_of(bad).code() == confluent_kafka.KafkaError.INVALID_CONFIG


def test_delete_records_moves_the_low_watermark(admin: AdminClient,
                                                kafka_bootstrap: str) -> None:
    topic = new_topic("cf-delrec")
    result(admin.create_topics([NewTopic(topic, 1, 1)]))
    confluent_produce(kafka_bootstrap, topic, sample_messages(10))

    deleted = result(admin.delete_records([confluent_kafka.TopicPartition(topic, 0, 4)]))
    assert deleted.low_watermark == 4
    everything = admin.delete_records(
        [confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_END)])
    assert result(everything).low_watermark == 10

    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "w"})
    try:
        low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0),
                                                   timeout=TIMEOUT)
    finally:
        consumer.close()
    assert (low, high) == (10, 10)


def test_delete_records_past_the_high_watermark_is_out_of_range(admin: AdminClient) -> None:
    topic = new_topic("cf-delrec-oor")
    result(admin.create_topics([NewTopic(topic, 1, 1)]))

    past = admin.delete_records([confluent_kafka.TopicPartition(topic, 0, 5)])
    assert error_of(past).code() == confluent_kafka.KafkaError.OFFSET_OUT_OF_RANGE


def test_describe_cluster_names_the_controller_and_brokers(admin: AdminClient) -> None:
    cluster = admin.describe_cluster().result(TIMEOUT)

    assert cluster.cluster_id
    assert cluster.controller is not None and cluster.controller.id == 1
    assert [node.id for node in cluster.nodes] == [1]
