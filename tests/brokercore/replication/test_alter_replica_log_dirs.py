"""AlterReplicaLogDirs on the wire: moving a replica between a broker's log dirs."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
import pytest
from kafka.protocol.admin import AlterReplicaLogDirsRequest, DescribeLogDirsRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.replication.test_log_dirs import create_topic, dirs_of, start
from tests.brokercore.wire import WireClient
from tests.brokerproc import BrokerProcess
from tests.compat.clients import Message, confluent_consume_all, confluent_produce, new_topic

Dir = AlterReplicaLogDirsRequest.AlterReplicaLogDir
Topic = Dir.AlterReplicaLogDirTopic


def alter(bootstrap: str, path: Path | str, topic: str, *partitions: int,
          version: int = 2) -> list[tuple[int, int]]:
    request = AlterReplicaLogDirsRequest(dirs=[Dir(path=str(path), topics=[
        Topic(name=topic, partitions=list(partitions))])])
    with WireClient(bootstrap) as wire:
        [result] = wire.request(request, version=version).results
    return [(p.partition_index, p.error_code) for p in result.partitions]


def replicas(bootstrap: str, topic: str) -> dict[tuple[str, bool], tuple[int, int]]:
    """{(dir, is future): (partition size, offset lag)} of the topic's partition 0."""
    wanted = DescribeLogDirsRequest.DescribableLogDirTopic(topic=topic, partitions=[0])
    with WireClient(bootstrap) as wire:
        response = wire.request(DescribeLogDirsRequest(topics=[wanted]), version=4)
    return {(r.log_dir, p.is_future_key): (p.partition_size, p.offset_lag)
            for r in response.results for t in r.topics for p in t.partitions}


def home(dirs: list[Path], topic: str) -> Path:
    [found] = [d for d in dirs if (d / f"{topic}-0").is_dir()]
    return found


def wait_until_moved(bootstrap: str, topic: str, target: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if list(replicas(bootstrap, topic)) == [(str(target.resolve()), False)]:
            return
        time.sleep(0.1)
    raise AssertionError(f"not moved: {replicas(bootstrap, topic)}")


@pytest.mark.parametrize("version", [1, 2])
def test_errors_and_a_move_to_the_current_dir(
        broker_factory: Callable[..., BrokerProcess], tmp_path: Path, version: int) -> None:
    dirs = dirs_of(tmp_path, 2)
    broker = start(broker_factory, dirs)
    topic = new_topic("errs")
    create_topic(broker.bootstrap, topic, 1)

    assert alter(broker.bootstrap, tmp_path / "nowhere", topic, 0, version=version) == \
        [(0, ErrorCode.LOG_DIR_NOT_FOUND)]
    assert alter(broker.bootstrap, dirs[0], topic, 7, version=version) == \
        [(7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert alter(broker.bootstrap, home(dirs, topic), topic, 0, version=version) == \
        [(0, ErrorCode.NONE)]
    assert list(replicas(broker.bootstrap, topic)) == [(str(home(dirs, topic).resolve()), False)]


def test_a_move_under_a_running_producer_keeps_every_record_in_order(
        broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    dirs = dirs_of(tmp_path, 2)
    broker = start(broker_factory, dirs)
    topic = new_topic("move")
    create_topic(broker.bootstrap, topic, 1)
    confluent_produce(broker.bootstrap, topic, [
        Message(None, b"x" * 1000 + str(i).encode()) for i in range(5000)])
    sent: list[bytes] = []
    stop = threading.Event()

    def produce() -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                             "linger.ms": 2})
        while not stop.is_set():
            value = f"live-{len(sent)}".encode()
            producer.produce(topic, value=value, partition=0)
            sent.append(value)
            producer.poll(0)
            time.sleep(0.001)
        assert producer.flush(30) == 0

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        while len(sent) < 100:
            time.sleep(0.01)
        target = next(d for d in dirs if d != home(dirs, topic))
        assert alter(broker.bootstrap, target, topic, 0) == [(0, ErrorCode.NONE)]
        wait_until_moved(broker.bootstrap, topic, target)
        written = len(sent)
        while len(sent) < written + 100:  # writes go on into the moved log
            time.sleep(0.01)
    finally:
        stop.set()
        writer.join()

    values = [m.value for m in confluent_consume_all(broker.bootstrap, topic)]
    assert values[:5000] == [b"x" * 1000 + str(i).encode() for i in range(5000)]
    assert values[5000:] == sent
    assert home(dirs, topic) == target


def test_a_broker_killed_mid_move_restarts_with_one_whole_log(
        broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    dirs = dirs_of(tmp_path, 2)
    broker = start(broker_factory, dirs)
    topic = new_topic("kill")
    create_topic(broker.bootstrap, topic, 1)
    expected = [b"y" * 2000 + str(i).encode() for i in range(10000)]
    confluent_produce(broker.bootstrap, topic, [Message(None, v) for v in expected])
    target = next(d for d in dirs if d != home(dirs, topic))

    assert alter(broker.bootstrap, target, topic, 0) == [(0, ErrorCode.NONE)]
    broker.kill()
    broker.start()

    assert [m.value for m in confluent_consume_all(broker.bootstrap, topic)] == expected
    assert len(list(replicas(broker.bootstrap, topic))) == 1
    assert not [p for d in dirs for p in d.iterdir() if p.name.endswith(("-future", "-delete"))]


@pytest.mark.parametrize("crash_point", ["copying", "between renames", "before delete"])
def test_recovery_from_each_crash_point_of_a_move(
        broker_factory: Callable[..., BrokerProcess], tmp_path: Path, crash_point: str) -> None:
    """The on-disk states a kill -9 can leave, made exactly: one consistent log after."""
    dirs = dirs_of(tmp_path, 2)
    broker = start(broker_factory, dirs)
    topic = new_topic("crash")
    create_topic(broker.bootstrap, topic, 1)
    expected = [f"v{i}".encode() for i in range(50)]
    confluent_produce(broker.bootstrap, topic, [Message(None, v) for v in expected])
    broker.stop()
    source = home(dirs, topic)
    target = next(d for d in dirs if d != source)
    current = source / f"{topic}-0"
    if crash_point == "copying":
        shutil.copytree(current, target / f"{topic}-0.abc-future")
    elif crash_point == "between renames":
        shutil.copytree(current, target / f"{topic}-0.abc-future")
        current.rename(source / f"{topic}-0.abc-delete")
    else:
        shutil.copytree(current, target / f"{topic}-0")
        current.rename(source / f"{topic}-0.abc-delete")
    moved = crash_point != "copying"

    broker.start()

    assert [m.value for m in confluent_consume_all(broker.bootstrap, topic)] == expected
    assert home(dirs, topic) == (target if moved else source)
    assert not [p for d in dirs for p in d.iterdir() if p.name.endswith(("-future", "-delete"))]
    assert list(replicas(broker.bootstrap, topic)) == [(str(home(dirs, topic).resolve()), False)]




def test_no_move_while_a_dir_is_offline(
        broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    dirs = dirs_of(tmp_path)
    dirs[2].parent.mkdir(parents=True, exist_ok=True)
    dirs[2].write_text("a file where a directory should be")
    broker = start(broker_factory, dirs)
    topic = new_topic("offline")
    create_topic(broker.bootstrap, topic, 1)
    other = next(d for d in dirs[:2] if d != home(dirs, topic))

    assert alter(broker.bootstrap, dirs[2], topic, 0) == [(0, ErrorCode.KAFKA_STORAGE_ERROR)]
    assert alter(broker.bootstrap, other, topic, 0) == [(0, ErrorCode.KAFKA_STORAGE_ERROR)]


def test_a_replica_on_a_dir_gone_offline_is_not_recreated_elsewhere(
        broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    dirs = dirs_of(tmp_path)
    broker = start(broker_factory, dirs)
    topic = new_topic("gone")
    create_topic(broker.bootstrap, topic, 3)
    expected = [f"v{i}".encode() for i in range(10)]
    confluent_produce(broker.bootstrap, topic, [
        Message(None, v, partition=p) for p in range(3) for v in expected])
    broker.stop()
    [lost] = [p for p in range(3) if (dirs[2] / f"{topic}-{p}").is_dir()]
    dirs[2].rename(tmp_path / "unplugged")
    dirs[2].write_text("a file where a directory should be")

    broker.start()

    assert alter(broker.bootstrap, dirs[0], topic, lost) == \
        [(lost, ErrorCode.KAFKA_STORAGE_ERROR)]
    assert not [d for d in dirs[:2] if (d / f"{topic}-{lost}").exists()]
    broker.stop()
    dirs[2].unlink()
    (tmp_path / "unplugged").rename(dirs[2])
    broker.start()
    for p in range(3):
        assert [m.value for m in confluent_consume_all(broker.bootstrap, topic, p)] == expected
