"""kill -9 mid-produce: every acknowledged message is there after restart, once, in order;
and the log dirs' recovery-point and log-start checkpoints across a kill -9."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from brokercore.replication.checkpoint import read_offsets
from brokercore.topic_partition import TopicPartition
from tests.brokerproc import BrokerProcess
from tests.compat.clients import confluent_consume_all, new_topic


def produce_until_killed(broker: BrokerProcess, topic: str, kill_after: int,
                         prefix: str) -> list[bytes]:
    """Produce acks=all until `kill_after` acks, kill -9 the broker, return what was acked."""
    acked: list[bytes] = []
    lock = threading.Lock()
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2,
        "message.timeout.ms": 3000, "retries": 0,
    })

    def delivered(err: object, msg: confluent_kafka.Message) -> None:
        value = msg.value()
        if err is None and value is not None:
            with lock:
                acked.append(value)

    i = 0
    killed = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            producer.produce(topic, value=f"{prefix}-{i:07d}".encode(), partition=0,
                             on_delivery=delivered)
            i += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
        with lock:
            enough = len(acked) >= kill_after
        if enough and not killed:
            broker.kill()
            killed = True
            break
    # Whatever was in flight fails now: written-but-unacked messages may or may not exist.
    producer.purge(in_queue=True, in_flight=True)
    producer.flush(1)
    with lock:
        return list(acked)


def test_every_acked_message_survives_kill_dash_nine(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"num.partitions": "1"})
    topic = new_topic("crash")
    all_acked: list[bytes] = []
    for round_no, kill_after in enumerate((300, 1500, 50)):
        acked = produce_until_killed(broker, topic, kill_after, f"r{round_no}")
        assert len(acked) >= kill_after
        all_acked += acked
        broker.start()

        stored = [m.value for m in confluent_consume_all(broker.bootstrap, topic)]
        stored_set = set(stored)
        missing = [v for v in all_acked if v not in stored_set]
        assert not missing, f"round {round_no}: {len(missing)} acked messages lost"
        assert len(stored) == len(set(stored)), "duplicates after recovery"
        positions = [stored.index(v) for v in all_acked]
        assert positions == sorted(positions), "acked messages out of order"


def test_a_kill_between_checkpoint_writes_keeps_every_acked_record_and_the_written_log_start(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path,
) -> None:
    dirs = [tmp_path / "broker" / "a", tmp_path / "broker" / "b"]
    broker = broker_factory({
        "log.dirs": ",".join(map(str, dirs)), "log.flush.interval.messages": "20",
        "log.flush.offset.checkpoint.interval.ms": "200",
        "log.flush.start.offset.checkpoint.interval.ms": "200"})
    topic = new_topic("ckpt")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for n in range(100):
        producer.produce(topic, value=b"early-%d" % n, partition=n % 2)
    assert producer.flush(10) == 0
    deleted = admin.delete_records([confluent_kafka.TopicPartition(topic, 0, 20)])
    next(iter(deleted.values())).result(10)
    tp0 = TopicPartition(topic, 0)
    deadline = time.monotonic() + 10
    while not any(read_offsets(d / "log-start-offset-checkpoint").get(tp0) == 20 for d in dirs):
        assert time.monotonic() < deadline, "the log start was never checkpointed"
        time.sleep(0.05)

    late = [b"late-%d" % n for n in range(100)]
    for n, value in enumerate(late):  # acked, then killed before the next checkpoints
        producer.produce(topic, value=value, partition=n % 2)
    assert producer.flush(10) == 0
    broker.kill()
    broker.start()

    stored = [m.value for p in (0, 1) for m in confluent_consume_all(broker.bootstrap, topic, p)]
    assert [v for v in stored if v is not None and v.startswith(b"early")] == \
        [b"early-%d" % n for n in range(40, 100, 2)] + [b"early-%d" % n for n in range(1, 100, 2)]
    assert [v for v in stored if v is not None and v.startswith(b"late")] == \
        late[0::2] + late[1::2]
    for d in dirs:  # and nothing left in the partitions' own directories
        assert not list(d.glob("*/recovery-point-offset-checkpoint"))
        assert not list(d.glob("*/log-start-offset-checkpoint"))
