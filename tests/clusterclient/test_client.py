"""clusterclient against the real built-in broker, over real sockets."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from brokercluster.ports import free_port
from clusterclient import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    ClusterClient,
    ClusterRequestError,
    ClusterUnavailable,
    ConfigChange,
    ConfigOperation,
    GroupState,
    GroupType,
    OffsetQuery,
    ResourceKind,
    TopicPartition,
)
from tests.brokerproc import BrokerProcess


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def client(kafka_bootstrap: str) -> ClusterClient:
    return ClusterClient(kafka_bootstrap, {"client.id": "clusterclient-test"}, timeout=10)


@pytest.fixture(scope="module", params=["own connections", "librdkafka"])
def offsets_client(request: pytest.FixtureRequest, kafka_bootstrap: str) -> ClusterClient:
    """ListOffsets both ways: one request per leader over clusterclient's own connections
    (offset_reads.py), and librdkafka's admin call (batched_offsets=False)."""
    return ClusterClient(kafka_bootstrap, {"client.id": "clusterclient-test"}, timeout=10,
                         batched_offsets=request.param == "own connections")


def produce(bootstrap: str, topic: str, counts: dict[int, int], timestamp: int | None = None
            ) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition, count in counts.items():
        for i in range(count):
            extra = {} if timestamp is None else {"timestamp": timestamp + i}
            producer.produce(topic, value=b"v%d" % i, partition=partition, **extra)
    assert producer.flush(30) == 0


def test_metadata_snapshot_shows_brokers_topics_and_partition_state(
        client: ClusterClient) -> None:
    topic = unique("meta")
    client.create_topic(topic, partitions=3, replication_factor=1)
    snapshot = client.metadata()
    assert snapshot.cluster_id
    assert [b.node_id for b in snapshot.brokers] == [1]
    assert snapshot.controller_id == 1
    found = snapshot.topics[topic]
    assert found.partition_ids == [0, 1, 2] and not found.internal
    assert found.replication_factor == 1
    p = found.partition(2)
    assert p is not None and (p.leader, p.replicas, p.isr) == (1, (1,), (1,))
    assert not p.offline and not p.under_replicated
    assert snapshot.leaders()[1] >= 3


def test_metadata_is_cached_until_refreshed_or_invalidated(client: ClusterClient) -> None:
    first = client.metadata()
    assert client.metadata() is first
    assert client.metadata(refresh=True) is not first
    topic = unique("cache")
    client.create_topic(topic, partitions=1)  # invalidates the cache
    assert topic in client.metadata().topics


def test_unknown_topic_is_a_request_error_with_kafka_code(client: ClusterClient) -> None:
    with pytest.raises(ClusterRequestError) as raised:
        client.topic(unique("missing"))
    assert (raised.value.code, raised.value.code_name) == (3, "UNKNOWN_TOPIC_OR_PART")


def test_creating_an_existing_topic_names_the_kafka_error(client: ClusterClient) -> None:
    topic = unique("twice")
    client.create_topic(topic, partitions=1)
    with pytest.raises(ClusterRequestError) as raised:
        client.create_topic(topic, partitions=1)
    assert raised.value.code_name == "TOPIC_ALREADY_EXISTS" and raised.value.topic == topic


def test_topic_configs_carry_source_default_and_read_only(client: ClusterClient) -> None:
    topic = unique("configs")
    client.create_topic(topic, partitions=1, configs={"retention.ms": "3600000"})
    entries = {e.name: e for e in client.topic_configs(topic)}
    retention = entries["retention.ms"]
    assert (retention.value, retention.source, retention.is_default) == (
        "3600000", "DYNAMIC_TOPIC_CONFIG", False)
    assert entries["cleanup.policy"].is_default
    assert entries["cleanup.policy"].source != "DYNAMIC_TOPIC_CONFIG"

    client.incremental_alter_configs(ResourceKind.TOPIC, topic, [
        ConfigChange("retention.ms", operation=ConfigOperation.DELETE),
        ConfigChange("cleanup.policy", "compact")])
    entries = {e.name: e for e in client.topic_configs(topic)}
    assert entries["retention.ms"].is_default
    assert entries["cleanup.policy"].value == "compact"


def test_broker_configs_are_described(client: ClusterClient) -> None:
    names = {e.name for e in client.broker_configs(1)}
    assert "log.retention.hours" in names or "log.retention.ms" in names


def test_list_offsets_answers_each_query_in_one_batch(offsets_client: ClusterClient,
                                                      kafka_bootstrap: str) -> None:
    client = offsets_client
    topic = unique("offsets")
    client.create_topic(topic, partitions=2)
    base = int(time.time() * 1000) - 60_000
    produce(kafka_bootstrap, topic, {0: 10, 1: 4}, timestamp=base)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert {tp: o.offset for tp, o in client.list_offsets({p0: LATEST, p1: LATEST})
            .checked().items()} == {p0: 10, p1: 4}
    assert client.list_offsets({p0: EARLIEST}).offset(p0) == 0
    assert client.list_offsets({p0: MAX_TIMESTAMP}).offset(p0) == 9
    assert client.list_offsets({p0: OffsetQuery.at(base + 5)}).offset(p0) == 5
    assert client.delete_records({p0: 3}) == {p0: 3}
    assert client.list_offsets({p0: EARLIEST}).offset(p0) == 3


def test_list_offsets_of_a_missing_partition_is_a_value(offsets_client: ClusterClient) -> None:
    client = offsets_client
    topic = unique("half")
    client.create_topic(topic, partitions=1)
    good, bad = TopicPartition(topic, 0), TopicPartition(topic, 7)
    answer = client.list_offsets({good: LATEST, bad: LATEST})
    assert answer.offset(good) == 0
    assert bad in answer.errors and answer.errors[bad].partition == 7
    with pytest.raises(ClusterRequestError):
        answer.checked()


def test_list_offsets_of_partitions_newer_than_the_metadata_are_answered(
        client: ClusterClient, kafka_bootstrap: str) -> None:
    """The leaders come from the last metadata snapshot; a partition it does not know is
    asked for again after a fresh one. (librdkafka's path answers such a partition
    _UNKNOWN_PARTITION from its own cache until that cache is refreshed.)"""
    topic = unique("grown")
    client.create_topic(topic, partitions=1)
    assert len(client.metadata(refresh=True).topics[topic].partitions) == 1  # the snapshot
    other = ClusterClient(kafka_bootstrap, timeout=10)  # another client grows the topic
    other.create_partitions(topic, 3)
    other.close()
    produce(kafka_bootstrap, topic, {2: 6})
    answer = client.list_offsets({TopicPartition(topic, p): LATEST for p in range(3)})
    assert answer.checked() and answer.offset(TopicPartition(topic, 2)) == 6


def test_group_lag_of_a_live_consumer_group(client: ClusterClient, kafka_bootstrap: str,
                                            member: Callable[..., Consumer]) -> None:
    topic, group = unique("lag"), unique("lag-group")
    client.create_topic(topic, partitions=2)
    produce(kafka_bootstrap, topic, {0: 10, 1: 5})
    consumer = member(group, topic)
    consumer.commit(offsets=[KafkaTopicPartition(topic, 0, 4), KafkaTopicPartition(topic, 1, 5)],
                    asynchronous=False)

    lag = client.group_lag(group)
    assert lag.state == "STABLE"
    rows = {(p.topic, p.partition): p for p in lag.partitions}
    assert (rows[(topic, 0)].committed_offset, rows[(topic, 0)].log_end_offset,
            rows[(topic, 0)].lag) == (4, 10, 6)
    assert rows[(topic, 1)].lag == 0
    owner = rows[(topic, 0)].member
    assert owner is not None and owner.client_id == "lag-tester" and owner.member_id
    assert (lag.total_lag, lag.max_lag) == (6, 6)
    assert lag.max_lag_partition == rows[(topic, 0)]

    described = client.describe_group(group)
    assert described.coordinator is not None and described.coordinator.node_id == 1
    assert {tp.partition for m in described.members for tp in m.assignment} == {0, 1}
    assert group in {g.group_id for g in client.list_groups()}


def test_groups_of_both_protocols_come_with_their_type_state_and_assignments(
        client: ClusterClient, member: Callable[..., Consumer]) -> None:
    topic = unique("kinds")
    client.create_topic(topic, partitions=2)
    classic, consumer = unique("classic"), unique("kip848")
    member(classic, topic)
    kip848 = member(consumer, topic, "consumer")

    listed = {g.group_id: g for g in client.list_groups()}
    assert (listed[classic].type, listed[consumer].type) == (GroupType.CLASSIC,
                                                              GroupType.CONSUMER)
    only = {g.group_id for g in client.list_groups(types=[GroupType.CONSUMER])}
    assert consumer in only and classic not in only
    described = client.describe_groups([classic, consumer])
    old, new = described[classic], described[consumer]
    assert (old.type, old.state, new.type, new.state) == (
        GroupType.CLASSIC, GroupState.STABLE, GroupType.CONSUMER, GroupState.STABLE)
    assert new.partition_assignor == "uniform"  # the broker's server-side assignor
    [owner] = new.members
    both = (TopicPartition(topic, 0), TopicPartition(topic, 1))
    assert owner.assignment == owner.target_assignment == both and not owner.reconciling
    assert old.members[0].target_assignment is None  # classic groups have no target
    assert client.group_lag(consumer).partitions[0].member == owner

    kip848.close()  # leaves the group (member epoch -1)
    assert client.describe_group(consumer).state is GroupState.EMPTY


def test_committed_offsets_of_many_groups(client: ClusterClient) -> None:
    topic = unique("many")
    client.create_topic(topic, partitions=1)
    tp = TopicPartition(topic, 0)
    groups = [unique("g") for _ in range(30)]
    for i, g in enumerate(groups):
        client.alter_group_offsets(g, {tp: i})
    nobody = unique("never-committed")
    answers = client.committed_offsets_many([*groups, nobody])
    assert [answers[g].offsets for g in groups] == [{tp: i} for i in range(30)]
    assert answers[nobody].offsets == {} and answers[nobody].error is None
    lags = client.group_lags(groups[:3])
    assert [lags[g].partitions[0].lag for g in groups[:3]] == [0, 0, 0]


def test_group_offsets_are_deleted_with_the_group(client: ClusterClient) -> None:
    topic, group = unique("gone"), unique("gone-group")
    client.create_topic(topic, partitions=1)
    client.alter_group_offsets(group, {TopicPartition(topic, 0): 0})
    client.delete_groups([group])
    assert client.committed_offsets(group) == {}
    with pytest.raises(ClusterRequestError) as raised:
        client.delete_groups([group])
    assert raised.value.code_name == "GROUP_ID_NOT_FOUND"


@pytest.mark.timeout(60)
def test_an_unreachable_cluster_raises_cluster_unavailable() -> None:
    client = ClusterClient(f"127.0.0.1:{free_port()}", timeout=2)
    with pytest.raises(ClusterUnavailable):
        client.metadata()
    with pytest.raises(ClusterUnavailable):
        client.list_groups()


@pytest.mark.timeout(90)
def test_a_stopped_cluster_raises_cluster_unavailable(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory()
    client = ClusterClient(broker.bootstrap, timeout=2)
    client.create_topic("kept", partitions=1)
    assert client.end_offsets([TopicPartition("kept", 0)]).offset(TopicPartition("kept", 0)) == 0
    assert [b.node_id for b in client.metadata().brokers] == [1]
    broker.stop()
    with pytest.raises(ClusterUnavailable):  # its leader, from the cached metadata, is gone
        client.end_offsets([TopicPartition("kept", 0)])
    with pytest.raises(ClusterUnavailable):
        client.metadata(refresh=True)
    with pytest.raises(ClusterUnavailable):
        client.committed_offsets_many(["a", "b"])
