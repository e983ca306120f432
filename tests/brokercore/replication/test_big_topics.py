"""Creating many partitions at once leaves every broker of a 3-broker cluster in place,
and a broker killed while it creates them comes back with all of them.

Issue 14: applying a topic of 1,000 partitions used to hold each broker's event loop for
seconds (8,000 fsyncs), so brokers missed heartbeats, were fenced, and every leadership
moved. Sessions here are short (`FAST_FAILOVER`: 3 s), so a stall that long would fence.
Nothing is timed: a fenced broker shows as a leader epoch above 0 (its leaderships moved),
a preferred replica no longer leading, or the controller's "fencing broker" line.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import MetadataRequest

from tests.brokercore.wire import WireClient
from tests.brokerproc import BrokerProcess, ClusterProcess
from tests.cluster.faults import FAST_FAILOVER, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    with ClusterProcess(tmp_path / "cluster", brokers=3, overrides=FAST_FAILOVER) as c:
        yield c


def create(cluster: ClusterProcess, topics: dict[str, int]) -> None:
    """One CreateTopics request for every topic, replication factor 3.

    Topics refused as NOT_CONTROLLER (the metadata quorum elected a new leader while the
    machine was loaded: that moves no partition leader) are asked for again, as Kafka's
    own AdminClient does; one that then already exists was created the first time."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    pending = dict(topics)
    for attempt in range(3):
        futures = admin.create_topics([NewTopic(n, count, 3) for n, count in pending.items()],
                                      request_timeout=120, operation_timeout=120)
        for name, future in futures.items():
            error = future.exception()
            code = error.args[0].code() if error is not None else None
            if error is None or (attempt and code == KafkaError.TOPIC_ALREADY_EXISTS):
                del pending[name]
            elif code != KafkaError.NOT_CONTROLLER:
                raise error
        if not pending:
            return
    raise AssertionError(f"not created: {sorted(pending)}")


def leaders(cluster: ClusterProcess, node_id: int,
            topics: dict[str, int]) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(leader, leader epoch, preferred replica) of every partition, as `node_id` sees it;
    empty until it knows them all."""
    with WireClient(cluster.bootstrap_of(node_id), timeout=30) as client:
        response = client.request(MetadataRequest(
            topics=None, allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False), 9)
    found = {(t.name, p.partition_index): (p.leader_id, p.leader_epoch, p.replica_nodes[0])
             for t in response.topics if t.name in topics for p in t.partitions}
    return found if len(found) == sum(topics.values()) else {}


def assert_nobody_fenced(cluster: ClusterProcess, topics: dict[str, int]) -> None:
    for node_id in (1, 2, 3):
        seen = wait_until(f"broker {node_id} knows every partition",
                          functools.partial(leaders, cluster, node_id, topics))
        moved = {tp: v for tp, v in seen.items() if v[1] != 0 or v[0] != v[2]}
        assert not moved, f"leaderships moved, as seen by {node_id}: {sorted(moved)[:10]}"
        assert "fencing broker" not in cluster.broker_log(node_id)


def assert_every_partition_works(bootstrap: str, topics: dict[str, int]) -> None:
    """One acks=all record into each partition, and every one read back."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "linger.ms": 20, "message.timeout.ms": 120000})
    failed: list[object] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    for name, count in topics.items():
        for index in range(count):
            producer.produce(name, f"{name}-{index}".encode(), partition=index,
                             on_delivery=delivered)
            producer.poll(0)
    assert producer.flush(120) == 0
    assert not failed, failed[:5]

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                         "group.id": "big-topics", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(name, index, confluent_kafka.OFFSET_BEGINNING)
                     for name, count in topics.items() for index in range(count)])
    read: Counter[tuple[str, int]] = Counter()
    try:
        wait_until("every record is read back", lambda: _consume(consumer, read)
                   and len(read) == sum(topics.values()), timeout=120, every=0)
    finally:
        consumer.close()
    assert all(read[tp] == 1 for tp in read), [tp for tp, n in read.items() if n != 1][:10]


def _consume(consumer: confluent_kafka.Consumer, read: Counter[tuple[str, int]]) -> bool:
    for message in consumer.consume(1000, timeout=1):
        if message.error() is None:
            topic, partition = message.topic(), message.partition()
            assert message.value() == f"{topic}-{partition}".encode()
            read[(topic, partition)] += 1
    return True


def test_a_topic_of_a_thousand_partitions_fences_no_broker(cluster: ClusterProcess) -> None:
    topics = {"big": 1000}
    create(cluster, topics)
    assert_nobody_fenced(cluster, topics)
    assert_every_partition_works(cluster.bootstrap, topics)
    assert_nobody_fenced(cluster, topics)


def test_a_hundred_topics_in_one_request_fence_no_broker(cluster: ClusterProcess) -> None:
    topics = {f"many-{i:03d}": 10 for i in range(100)}
    create(cluster, topics)
    assert_nobody_fenced(cluster, topics)
    assert_every_partition_works(cluster.bootstrap, topics)
    assert_nobody_fenced(cluster, topics)


def test_a_broker_killed_while_creating_a_big_topic_restarts_with_all_of_it(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    logs = broker.data_dir / "logs"
    topics = {"big": 1000}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("big", 1000, 1)], request_timeout=120)
    # Kill -9 once some of its logs exist: the rest are still being created (or, on a
    # fast day, all of them are, and this checks a plain restart).
    wait_until("the broker creates the topic's logs",
               lambda: len(list(logs.glob("big-*"))) >= 100, every=0.005)
    broker.kill()
    broker.start()
    assert_every_partition_works(broker.bootstrap, topics)
