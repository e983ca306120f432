"""Replication across real broker processes, through real clients.

A `python -m brokercluster` of three brokers; topics with replication factor 3.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import aiokafka
import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import ClusterProcess
from tests.compat.clients import aiokafka_consume, kafka_python_consume, new_topic


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    overrides = {"replica.lag.time.max.ms": "3000", "replica.fetch.backoff.ms": "200"}
    with ClusterProcess(tmp_path_factory.mktemp("replication"), brokers=3,
                        overrides=overrides) as c:
        yield c


def create_topic(bootstrap: str, topic: str, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, 3, config=configs or {})])
    futures[topic].result(30)
    # Created on the controller; wait until Metadata from any broker shows it in full.
    wait_until_isr(bootstrap, topic, [1, 2, 3])


def produce_acks_all(bootstrap: str, topic: str, values: list[bytes]) -> dict[bytes, object]:
    """Each value's outcome: its offset when acknowledged, else the error."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 5,
                                         "message.timeout.ms": 30000})
    outcome: dict[bytes, object] = {}

    def report(err: object, msg: confluent_kafka.Message) -> None:
        outcome[msg.value()] = err if err is not None else msg.offset()

    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=report)
        producer.poll(0)
    assert producer.flush(60) == 0
    return outcome


def consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                                         "auto.offset.reset": "earliest",
                                         "enable.partition.eof": True})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    read: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                break
            raise AssertionError(str(msg.error()))
        read.append((msg.offset(), msg.value()))
    consumer.close()
    return read


def segment_bytes(cluster: ClusterProcess, node_id: int, topic: str) -> bytes:
    directory = cluster.data_dir / f"broker-{node_id}" / f"{topic}-0"
    return b"".join(path.read_bytes() for path in sorted(Path(directory).glob("*.log")))


def wait_for_identical_logs(cluster: ClusterProcess, topic: str) -> bytes:
    deadline = time.monotonic() + 60
    while True:
        logs = {i: segment_bytes(cluster, i, topic) for i in (1, 2, 3)}
        if len(set(logs.values())) == 1:
            return logs[1]
        if time.monotonic() > deadline:
            raise AssertionError(f"replica logs differ: { {i: len(b) for i, b in logs.items()} }")
        time.sleep(0.1)


def test_acks_all_writes_reach_every_replica_and_consumers_read_exactly_them(
    cluster: ClusterProcess,
) -> None:
    topic = new_topic("rf3")
    create_topic(cluster.bootstrap, topic, {"min.insync.replicas": "2"})
    values = [b"value-%04d" % i for i in range(300)]
    outcome = produce_acks_all(cluster.bootstrap, topic, values)
    assert all(isinstance(result, int) for result in outcome.values()), outcome
    log = wait_for_identical_logs(cluster, topic)
    assert len(log) > 300 * len(b"value-0000")
    read = consume_all(cluster.bootstrap, topic)
    assert read == sorted((offset, value) for value, offset in outcome.items())


def test_kafka_python_and_aiokafka_acks_all_writes_are_replicated_and_read_back(
    cluster: ClusterProcess,
) -> None:
    topic = new_topic("rf3-py")
    create_topic(cluster.bootstrap, topic, {"min.insync.replicas": "2"})
    producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    futures = [producer.send(topic, value=b"kafka-python-%d" % i, partition=0)
               for i in range(100)]
    producer.flush(30)
    offsets = [future.get(timeout=30).offset for future in futures]
    producer.close()

    async def produce_aiokafka() -> list[int]:
        async_producer = aiokafka.AIOKafkaProducer(bootstrap_servers=cluster.bootstrap,
                                                   acks="all", linger_ms=5)
        await async_producer.start()
        try:
            sent = [await async_producer.send(topic, value=b"aiokafka-%d" % i, partition=0)
                    for i in range(100)]
            return [(await future).offset for future in sent]
        finally:
            await async_producer.stop()

    offsets += asyncio.run(produce_aiokafka())
    assert offsets == list(range(200))
    wait_for_identical_logs(cluster, topic)
    expected = [b"kafka-python-%d" % i for i in range(100)] + [b"aiokafka-%d" % i
                                                                for i in range(100)]
    assert [m.value for m in kafka_python_consume(cluster.bootstrap, topic, 200)] == expected
    assert [m.value for m in aiokafka_consume(cluster.bootstrap, topic, 200)] == expected


def partition_state(bootstrap: str, topic: str) -> tuple[int, list[int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
    return meta.leader, sorted(meta.isrs)


def wait_until_isr(bootstrap: str, topic: str, isr: list[int], timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            leader, current = partition_state(bootstrap, topic)
        except (confluent_kafka.KafkaException, KeyError):  # KeyError: not applied there yet
            current, leader = [], -1
        if current == isr:
            return leader
        if time.monotonic() > deadline:
            raise AssertionError(f"ISR of {topic} is {current}, never {isr}")
        time.sleep(0.2)


def produce_one(bootstrap: str, topic: str, value: bytes, timeout_s: float = 10,
                retries: int = 0) -> object:
    """The delivery error code of one acks=all write (None when acknowledged)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "message.timeout.ms": int(timeout_s * 1000),
                                         "retries": retries})
    outcome: list[object] = []
    producer.produce(topic, value, partition=0,
                     on_delivery=lambda err, _msg: outcome.append(err and err.code()))
    producer.flush(timeout_s + 5)
    return outcome[0]


def test_a_stopped_follower_leaves_the_isr_and_rejoins_after_restart(
    cluster: ClusterProcess,
) -> None:
    topic = new_topic("rejoin")
    create_topic(cluster.bootstrap, topic, {"min.insync.replicas": "2"})
    leader, isr = partition_state(cluster.bootstrap, topic)
    assert isr == [1, 2, 3]
    follower = next(i for i in (1, 2, 3) if i != leader)
    cluster.kill(follower)
    try:
        wait_until_isr(cluster.bootstrap, topic, sorted(set(isr) - {follower}))
        # The leader noticed the lag itself (replica.lag.time.max.ms is shorter than the
        # controller's session timeout).
        assert f"followers [{follower}] are out of sync" in cluster.broker_log(leader)
        values = [b"while-%d-is-down-%d" % (follower, i) for i in range(50)]
        outcome = produce_acks_all(cluster.bootstrap, topic, values)
        assert all(isinstance(result, int) for result in outcome.values()), outcome
    finally:
        cluster.start(follower)
    wait_until_isr(cluster.bootstrap, topic, [1, 2, 3])
    wait_for_identical_logs(cluster, topic)


def test_acks_all_is_refused_not_lost_when_min_insync_replicas_cannot_be_met(
    cluster: ClusterProcess,
) -> None:
    # Stopping two of three brokers would also stop the metadata quorum, so no ISR could
    # change; min.insync.replicas=3 with one broker down shows the refusal instead.
    topic = new_topic("minisr")
    create_topic(cluster.bootstrap, topic, {"min.insync.replicas": "3"})
    leader, _ = partition_state(cluster.bootstrap, topic)
    follower = next(i for i in (1, 2, 3) if i != leader)
    cluster.stop(follower)
    try:
        wait_until_isr(cluster.bootstrap, topic, sorted({1, 2, 3} - {follower}))
        code = produce_one(cluster.bootstrap, topic, b"refused")
        assert code == confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS
    finally:
        cluster.start(follower)
    wait_until_isr(cluster.bootstrap, topic, [1, 2, 3])
    # The broker that answered Metadata may apply the ISR's growth before the leader does;
    # NOT_ENOUGH_REPLICAS is retriable, and a client retries it, as this one now does.
    assert produce_one(cluster.bootstrap, topic, b"accepted", retries=5) is None
    assert [value for _, value in consume_all(cluster.bootstrap, topic)] == [b"accepted"]


@pytest.mark.slow
def test_a_returning_old_leader_truncates_its_divergent_tail(cluster: ClusterProcess) -> None:
    # Replicas 1 and 2; broker 3 keeps the metadata quorum alive. With 2 out of the ISR,
    # leader 1 takes a write 2 never sees; 1 dies, 2 returns and is elected uncleanly, so
    # 1's last write is not in the new leader's history and 1 must cut it on its return.
    topic = new_topic("diverge")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]],
                                  config={"unclean.leader.election.enable": "true"})]
                        )[topic].result(30)
    assert produce_one(cluster.bootstrap, topic, b"committed") is None
    wait_until_isr(cluster.bootstrap, topic, [1, 2])
    cluster.stop(2)
    try:
        wait_until_isr(cluster.bootstrap, topic, [1])
        assert produce_one(cluster.bootstrap, topic, b"only-on-the-old-leader") is None
        cluster.kill(1)
    finally:
        cluster.start(2)
    try:
        assert wait_until_isr(cluster.bootstrap, topic, [2]) == 2
        assert produce_one(cluster.bootstrap, topic, b"after-failover", timeout_s=30) is None
    finally:
        cluster.start(1)
    wait_until_isr(cluster.bootstrap, topic, [1, 2])
    deadline = time.monotonic() + 60
    while segment_bytes(cluster, 1, topic) != segment_bytes(cluster, 2, topic):
        assert time.monotonic() < deadline, "replica logs never became identical"
        time.sleep(0.1)
    assert [value for _, value in consume_all(cluster.bootstrap, topic)] == [
        b"committed", b"after-failover"]
    assert "truncated from 2 to 1" in cluster.broker_log(1)
