"""Kafka 4.0 behaviours confluent-kafka's own integration suite checks, through confluent-kafka
over real sockets against one broker shared by the module.

Each test uses its own topic and group; nothing asserts a timing, the waits only bound a hang.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from tests.brokerproc import BrokerProcess
from tests.compat.clients import Message, confluent_produce

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


def _group_type(admin: AdminClient, group: str) -> confluent_kafka.ConsumerGroupType:
    return admin.describe_consumer_groups([group])[group].result(15).type


def _poll_until_shared(consumers: list[confluent_kafka.Consumer], partitions: int) -> None:
    """Poll every consumer until each holds its share; the bound only stops a hang."""
    share = partitions // len(consumers)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for consumer in consumers:
            consumer.poll(0.1)
        if all(len(c.assignment()) == share for c in consumers):
            break
    owned = [tp.partition for c in consumers for tp in c.assignment()]
    assert sorted(owned) == list(range(partitions))
    assert [len(c.assignment()) for c in consumers] == [share] * len(consumers)


@pytest.mark.parametrize("strategy", ["roundrobin", "cooperative-sticky"])
def test_a_group_upgrades_when_a_consumer_protocol_member_joins_and_downgrades_when_it_leaves(
    broker: BrokerProcess, strategy: str,
) -> None:
    """confluent-kafka's test_consumer_upgrade_downgrade: a classic consumer, then a
    consumer-protocol one in the same group (the group becomes a consumer group, the
    partitions are shared and every record read), then the latter closes (the group is
    classic again and the first consumer gets everything back). Before online migration the
    second consumer was refused with "The group id does not exist"."""
    partitions = 10
    topic = _topic(broker.bootstrap, partitions)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {"bootstrap.servers": broker.bootstrap, "group.id": topic,
              "auto.offset.reset": "earliest"}
    classic = confluent_kafka.Consumer({
        **config, "group.protocol": "classic", "partition.assignment.strategy": strategy,
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    modern: confluent_kafka.Consumer | None = confluent_kafka.Consumer(
        {**config, "group.protocol": "consumer"})
    try:
        classic.subscribe([topic])
        _poll_until_shared([classic], partitions)
        assert _group_type(admin, topic) == confluent_kafka.ConsumerGroupType.CLASSIC

        assert modern is not None
        modern.subscribe([topic])
        _poll_until_shared([classic, modern], partitions)
        assert _group_type(admin, topic) == confluent_kafka.ConsumerGroupType.CONSUMER
        confluent_produce(broker.bootstrap, topic,
                          [Message(None, f"r{i}".encode(), partition=i % partitions)
                           for i in range(100)])
        read: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(read) < 100 and time.monotonic() < deadline:
            for consumer in (classic, modern):
                msg = consumer.poll(0.1)
                if msg is not None and msg.error() is None:
                    read.append(msg.value())
        assert sorted(read) == sorted(f"r{i}".encode() for i in range(100))

        modern.close()
        modern = None
        _poll_until_shared([classic], partitions)
        assert _group_type(admin, topic) == confluent_kafka.ConsumerGroupType.CLASSIC
    finally:
        if modern is not None:
            modern.close()
        classic.close()


def test_a_topic_config_set_to_the_default_value_is_reported_as_set_on_the_topic(
    broker: BrokerProcess,
) -> None:
    """What confluent-kafka's test_incremental_alter_configs checks: a value set on a topic
    is a DYNAMIC_TOPIC_CONFIG (not a default) even when it equals the broker's value, however
    it was set (CreateTopics, IncrementalAlterConfigs, AlterConfigs)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = f"parity-{uuid.uuid4().hex[:8]}"
    [future] = admin.create_topics([NewTopic(created, 1, 1, config={
        "min.insync.replicas": "1"})]).values()
    future.result(15)
    incremental, replaced = _topic(broker.bootstrap), _topic(broker.bootstrap)
    for future in admin.incremental_alter_configs([ConfigResource(
            ResourceType.TOPIC, incremental, incremental_configs=[ConfigEntry(
                "min.insync.replicas", "1",
                incremental_operation=AlterConfigOpType.SET)])]).values():
        future.result(15)
    for future in admin.alter_configs([ConfigResource(
            ResourceType.TOPIC, replaced, set_config={"min.insync.replicas": "1"})]).values():
        future.result(15)
    for topic in (created, incremental, replaced):
        [future] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
        entry = future.result(15)["min.insync.replicas"]
        assert (entry.value, entry.source, entry.is_default) == (
            "1", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False)


def test_a_migrated_group_with_members_of_both_protocols_survives_a_coordinator_restart(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """The classic member's protocols and session live in the consumer group's records (tag
    0 of its member record), so the restarted coordinator still serves it through the
    classic protocol, and the group still downgrades when the consumer member leaves."""
    own = broker_factory(OVERRIDES)
    partitions = 4
    topic = _topic(own.bootstrap, partitions)
    admin = AdminClient({"bootstrap.servers": own.bootstrap})
    config = {"bootstrap.servers": own.bootstrap, "group.id": topic,
              "auto.offset.reset": "earliest"}
    classic = confluent_kafka.Consumer({
        **config, "group.protocol": "classic", "partition.assignment.strategy": "range",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    modern: confluent_kafka.Consumer | None = confluent_kafka.Consumer(
        {**config, "group.protocol": "consumer"})
    try:
        classic.subscribe([topic])
        _poll_until_shared([classic], partitions)
        assert modern is not None
        modern.subscribe([topic])
        _poll_until_shared([classic, modern], partitions)

        own.restart()
        _poll_until_shared([classic, modern], partitions)
        assert _group_type(admin, topic) == confluent_kafka.ConsumerGroupType.CONSUMER
        described = admin.describe_consumer_groups([topic])[topic].result(15)
        assert len(described.members) == 2

        modern.close()
        modern = None
        _poll_until_shared([classic], partitions)
        assert _group_type(admin, topic) == confluent_kafka.ConsumerGroupType.CLASSIC
    finally:
        if modern is not None:
            modern.close()
        classic.close()


def test_a_group_config_is_set_described_and_bounded_like_kafkas(broker: BrokerProcess) -> None:
    """confluent-kafka's test_incremental_alter_configs under group.protocol=consumer: a
    GROUP resource's consumer.session.timeout.ms is set and then the only value described
    as not a default (GROUP_CONFIG); a value outside the broker's bounds is INVALID_CONFIG."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    group = f"parity-{uuid.uuid4().hex[:8]}"

    def alter(value: str) -> None:
        [future] = admin.incremental_alter_configs([ConfigResource(
            ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
                "consumer.session.timeout.ms", value,
                incremental_operation=AlterConfigOpType.SET)])]).values()
        future.result(15)

    alter("5000")
    [future] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    described = future.result(15)
    assert sorted(str(e) for e in described.values() if not e.is_default) == [
        'consumer.session.timeout.ms="5000"']
    assert described["consumer.session.timeout.ms"].source == ConfigSource.GROUP_CONFIG.value
    assert described["consumer.heartbeat.interval.ms"].value == "300"  # the broker's
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        alter("999999")
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
