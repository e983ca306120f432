"""A log dir failing while the broker runs (KIP-112, KIP-858), met through real clients.

Three `python -m brokercore` processes form a cluster; each has two log dirs. Broker 2's
second dir is replaced by a file while producers write: the next write the broker makes
there (its high-watermark checkpoint, a segment roll) fails with ENOTDIR, a real OSError.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from brokercluster.ports import free_port
from tests.brokerproc import BrokerProcess
from tests.compat.clients import new_topic

PARTITIONS = 6
STORAGE_ERROR = 56  # KAFKA_STORAGE_ERROR


class Cluster:
    """Three brokers, each with log dirs `a` and `b`, voters of one metadata quorum."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None) -> None:
        controller_ports = {i: free_port() for i in (1, 2, 3)}
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in controller_ports.items())
        self.brokers: dict[int, BrokerProcess] = {}
        for i in (1, 2, 3):
            home = data_dir / f"broker-{i}"
            broker = BrokerProcess(home, node_id=i)
            broker.overrides.update({
                "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},"
                             f"CONTROLLER://127.0.0.1:{controller_ports[i]}",
                "controller.listener.names": "CONTROLLER",
                "controller.quorum.voters": voters,
                "log.dirs": f"{home / 'a'},{home / 'b'}",
                "replica.high.watermark.checkpoint.interval.ms": "300",
                "replica.lag.time.max.ms": "3000",
                "leader.imbalance.check.interval.seconds": "2",
                **(overrides or {}),
            })
            self.brokers[i] = broker

    def start(self) -> Cluster:
        # Each waits for a quorum, so they start together.
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda b: b.start(90), self.brokers.values()))
        return self

    def kill(self) -> None:
        for broker in self.brokers.values():
            broker.kill()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def log_dir(self, node_id: int, name: str) -> Path:
        return self.brokers[node_id].data_dir / name


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path)
    try:
        yield cluster.start()
    finally:
        cluster.kill()


def partitions_of(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """Each partition's (leader, ISR), as Metadata answers."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    found = admin.list_topics(topic, timeout=10).topics[topic].partitions
    return {p: (meta.leader, sorted(meta.isrs)) for p, meta in found.items()}


def wait_until(check: Callable[[], bool], what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.2)


def describe_log_dirs(bootstrap: str, node_id: int) -> dict[str, dict[str, Any]]:
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [answer] = admin.describe_log_dirs(None, brokers=[node_id])
    finally:
        admin.close()
    return {entry["log_dir"]: entry for entry in answer["log_dirs"]}


def placed(entry: dict[str, Any], topic: str) -> set[int]:
    return {p["partition_index"] for t in entry["topics"] if t["name"] == topic
            for p in t["partitions"]}


class Producer:
    """acks=all, idempotent, round-robin over the partitions until stopped; remembers what
    was acknowledged and every delivery error."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 60000})
        self.acked: list[tuple[int, bytes]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _report(self, err: Any, msg: confluent_kafka.Message) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append((msg.partition(), msg.value()))

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set():
            self.producer.produce(self.topic, b"v%d" % sent, partition=sent % PARTITIONS,
                                  on_delivery=self._report)
            sent += 1
            self.producer.poll(0.01)

    def __enter__(self) -> Producer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        assert self.producer.flush(90) == 0


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                                         "enable.partition.eof": True,
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(PARTITIONS)])
    read: list[tuple[int, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    while len(at_end) < PARTITIONS and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
                continue
            raise AssertionError(str(msg.error()))
        read.append((msg.partition(), msg.value()))
    consumer.close()
    assert len(at_end) == PARTITIONS, "not every partition was read to its end"
    return read


def test_a_failed_dir_moves_its_leaders_away_and_the_broker_serves_its_other_dir(
        cluster: Cluster) -> None:
    topic = new_topic("dirfail")
    # Broker 2 is every partition's preferred leader; its replicas spread over both dirs.
    assignment = [[2, 1, 3] if p % 2 else [2, 3, 1] for p in range(PARTITIONS)]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, replica_assignment=assignment,
                                  config={"min.insync.replicas": "2"})])[topic].result(30)
    wait_until(lambda: all(state == (2, [1, 2, 3])
                           for state in partitions_of(cluster.bootstrap, topic).values()),
               "broker 2 leads every partition with a full ISR")
    # Metadata says so as soon as the controller has the topic, from any broker; broker 2
    # may not have applied the records yet, let alone opened its logs (under a loaded
    # machine it had not: its dirs held none, which once read as "all on one dir").
    # DescribeLogDirs answers from broker 2's own replicas.
    failing = cluster.log_dir(2, "b")
    dirs = str(cluster.log_dir(2, "a").resolve()), str(failing.resolve())
    wait_until(lambda: sum(len(placed(entry, topic)) for entry in describe_log_dirs(
                   cluster.bootstrap, 2).values()) == PARTITIONS,
               "broker 2 hosts every partition")
    found = describe_log_dirs(cluster.bootstrap, 2)
    on_a, on_b = (placed(found[d], topic) for d in dirs)
    # The dir with the fewest partitions takes each new one.
    assert (len(on_a), len(on_b)) == (PARTITIONS // 2, PARTITIONS // 2), (on_a, on_b)

    with Producer(cluster.bootstrap, topic) as producer:
        wait_until(lambda: len(producer.acked) > 100, "records are acknowledged")
        failing.rename(failing.with_name("b.failed"))
        failing.write_text("a file where the log dir was")

        def moved() -> bool:
            state = partitions_of(cluster.bootstrap, topic)
            return (all(state[p][0] not in (2, -1) and 2 not in state[p][1] for p in on_b)
                    and all(state[p] == (2, [1, 2, 3]) for p in on_a))

        wait_until(moved, "broker 2's partitions on the failed dir lead elsewhere, "
                          "those on its other dir stay")
        acked_at_move = len(producer.acked)
        wait_until(lambda: len(producer.acked) > acked_at_move + 100,
                   "records are acknowledged after the move")

    assert producer.errors == []
    read = read_all(cluster.bootstrap, topic)
    assert sorted(read) == sorted(producer.acked), "acknowledged records lost or duplicated"

    found = describe_log_dirs(cluster.bootstrap, 2)
    good, bad = (found[d] for d in dirs)
    assert bad["error_code"] == STORAGE_ERROR and bad["topics"] == []
    assert good["error_code"] == 0 and placed(good, topic) == on_a
    assert "is offline" in cluster.brokers[2].output.read_text()

    # Repaired and restarted, broker 2 has its replicas back: they catch up and rejoin.
    cluster.brokers[2].stop()
    failing.unlink()
    failing.with_name("b.failed").rename(failing)
    cluster.brokers[2].start(60)
    wait_until(lambda: all(isr == [1, 2, 3]
                           for _, isr in partitions_of(cluster.bootstrap, topic).values()),
               "broker 2 is back in every ISR")
    found = describe_log_dirs(cluster.bootstrap, 2)
    assert {path: (entry["error_code"], placed(entry, topic)) for path, entry in found.items()} \
        == {dirs[0]: (0, on_a), dirs[1]: (0, on_b)}
    assert sorted(read_all(cluster.bootstrap, topic)) == sorted(producer.acked)


def test_a_broker_whose_every_dir_failed_stops(
        broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    home = tmp_path / "only"
    broker = broker_factory({"log.dirs": str(home),
                             "replica.high.watermark.checkpoint.interval.ms": "200"})
    topic = new_topic("alldirs")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, b"before")
    assert producer.flush(30) == 0
    home.rename(home.with_name("only.failed"))
    home.write_text("a file where the log dir was")

    producer.produce(topic, b"after")  # moves the high watermark: the checkpoint fails
    producer.flush(10)

    assert broker.proc is not None
    assert broker.proc.wait(60) == 1
    assert "every log dir has failed" in broker.output.read_text()


def test_a_broker_whose_metadata_log_dir_fails_stops(
        broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    """Kafka's rule: the metadata log's dir failing stops the broker, though its data dir
    works. The log file is held open, so the first write to fail is the next snapshot's."""
    metadata = tmp_path / "metadata"
    broker = broker_factory({"log.dirs": str(tmp_path / "data"),
                             "metadata.log.dir": str(metadata),
                             "metadata.log.max.snapshot.interval.ms": "500"})
    metadata.rename(metadata.with_name("metadata.failed"))
    metadata.write_text("a file where the metadata log dir was")

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = new_topic("metafail")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].exception(30)  # records to snapshot

    assert broker.proc is not None
    assert broker.proc.wait(60) == 1
    assert "the metadata log dir" in broker.output.read_text()


def test_a_broker_that_cannot_tell_the_controller_of_a_failed_dir_stops(tmp_path: Path) -> None:
    """KIP-858's `log.dir.failure.timeout.ms`: brokers 1 and 3 are gone, so no controller
    answers broker 2's heartbeats, and the replicas of its failed dir would stay its own."""
    cluster = Cluster(tmp_path, {"log.dir.failure.timeout.ms": "2000"})
    try:
        cluster.start()
        topic = new_topic("unheard")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, 2, replica_assignment=[[2], [2]])])[topic].result(30)
        wait_until(lambda: all(placed(entry, topic) for entry in describe_log_dirs(
            cluster.bootstrap, 2).values()), "broker 2 holds a partition in each dir")
        broker = cluster.brokers[2]
        cluster.brokers[1].kill()
        cluster.brokers[3].kill()
        failing = cluster.log_dir(2, "b")
        failing.rename(failing.with_name("b.failed"))
        failing.write_text("a file where the log dir was")

        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": 1})
        for p in (0, 1):  # moves both high watermarks: dir b's checkpoint fails
            producer.produce(topic, b"after", partition=p)
        producer.flush(3)  # partition 1's write is refused from then on: no need to wait

        assert broker.proc is not None
        assert broker.proc.wait(60) == 1
        output = broker.output.read_text()
        assert "log dir" in output and "has not acknowledged the failure" in output
        assert "every log dir has failed" not in output
    finally:
        cluster.kill()
