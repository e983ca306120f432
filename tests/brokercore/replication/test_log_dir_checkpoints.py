"""Each log dir keeps its own `replication-offset-checkpoint`, listing only its partitions
(Kafka's layout); the one file of earlier versions is read once; a dir whose checkpoint
cannot be written goes offline and the others are written all the same; after a restart
with that dir still failed, its replicas stay offline and are not recreated elsewhere.

One in-process replica manager with two dirs behind a real Kafka listener; the test plays
the controller (`harness.Cluster`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from brokercore.controller.image import Record
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.checkpoint import FILE, read_high_watermarks, write_high_watermarks
from brokercore.replication.replica_manager import ReplicaManager
from brokercore.topic_partition import TopicPartition
from tests.brokercore.wire import record_batch

from .harness import Client, Cluster

TOPIC = "hw"
PARTITIONS = 4


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    dirs = [tmp_path / "disk0", tmp_path / "disk1"]
    cluster = Cluster(tmp_path, 1, {"log.dirs": ",".join(map(str, dirs))})
    await cluster.start()
    yield cluster
    await cluster.stop()


def dirs_of(cluster: Cluster) -> list[Path]:
    return [d.path for d in cluster.nodes[1].replica_manager.log_dirs]


def manager(cluster: Cluster) -> ReplicaManager:
    return cluster.nodes[1].replica_manager


async def produce(cluster: Cluster, rounds: int) -> dict[int, int]:
    """`p + 1` batches of two records to each partition p, `rounds` times; each partition's
    error code."""
    client = await Client.to(cluster.nodes[1])
    codes = {}
    try:
        for p in range(PARTITIONS):
            for _ in range(rounds * (p + 1)):
                response = await client.produce(TOPIC, record_batch([b"a", b"b"]), index=p)
                codes[p] = response.error_code
    finally:
        client.close()
    return codes


def expected(cluster: Cluster, log_dir: Path, per_batch: int) -> dict[TopicPartition, int]:
    return {tp: per_batch * (tp.partition + 1)
            for tp, d in manager(cluster).placement.items() if d.path == log_dir}


def follow_an_absent_leader(cluster: Cluster) -> None:
    """Broker 2 (never registered) leads every partition: broker 1's replicas learn nothing
    from it, so after a restart their high watermarks are exactly what was checkpointed."""
    image = cluster.history_image()
    topic = image.topics[TOPIC]
    changes: list[Record] = [
        {"type": "partition_change", "topic_id": topic.topic_id, "partition": p,
         "replicas": [1, 2], "isr": [1, 2], "leader": 2,
         "leader_epoch": topic.partitions[p].leader_epoch + 1}
        for p in range(PARTITIONS)]
    cluster.apply(*changes)


def high_watermarks(cluster: Cluster) -> dict[int, int]:
    return {tp.partition: p.high_watermark for tp, p in manager(cluster).partitions.items()}


async def test_each_dir_checkpoints_its_own_partitions_and_a_restart_reads_them(
        cluster: Cluster) -> None:
    await cluster.create_topic(TOPIC, [1], PARTITIONS)
    assert set((await produce(cluster, 1)).values()) == {ErrorCode.NONE}
    manager(cluster).checkpoint_high_watermarks()

    dirs = dirs_of(cluster)
    assert {d.path for d in manager(cluster).placement.values()} == set(dirs)
    for log_dir in dirs:
        assert read_high_watermarks(log_dir) == expected(cluster, log_dir, 2)

    follow_an_absent_leader(cluster)
    await cluster.restart_node(1)

    assert high_watermarks(cluster) == {p: 2 * (p + 1) for p in range(PARTITIONS)}


async def test_the_single_file_of_earlier_versions_is_read_once_then_split_per_dir(
        cluster: Cluster) -> None:
    await cluster.create_topic(TOPIC, [1], PARTITIONS)
    await produce(cluster, 1)
    follow_an_absent_leader(cluster)
    await cluster.stop_node(1)
    dirs = dirs_of(cluster)
    for log_dir in dirs:
        (log_dir / FILE).unlink()
    everything = {TopicPartition(TOPIC, p): 2 * (p + 1) for p in range(PARTITIONS)}
    write_high_watermarks(dirs[0], everything)  # as earlier versions did, in the first dir

    await cluster.restart_node(1)

    assert high_watermarks(cluster) == {p: 2 * (p + 1) for p in range(PARTITIONS)}
    manager(cluster).checkpoint_high_watermarks()
    for log_dir in dirs:
        assert read_high_watermarks(log_dir) == expected(cluster, log_dir, 2)


async def test_a_dir_whose_checkpoint_fails_goes_offline_and_the_other_is_written(
        cluster: Cluster) -> None:
    await cluster.create_topic(TOPIC, [1], PARTITIONS)
    await produce(cluster, 1)
    manager(cluster).checkpoint_high_watermarks()
    good, bad = dirs_of(cluster)
    on_bad = set(expected(cluster, bad, 2))
    bad.rename(bad.with_name("disk1.failed"))
    bad.write_text("a file where the log dir was")

    await produce(cluster, 1)  # the open segments still take writes
    manager(cluster).checkpoint_high_watermarks()

    assert read_high_watermarks(good) == expected(cluster, good, 4)
    [failed] = [d for d in manager(cluster).log_dirs if not d.online]
    assert failed.path == bad
    assert manager(cluster).offline == on_bad
    assert on_bad.isdisjoint(manager(cluster).partitions)
    codes = await produce(cluster, 1)
    for p, code in codes.items():
        on_failed = TopicPartition(TOPIC, p) in on_bad
        assert code == (ErrorCode.KAFKA_STORAGE_ERROR if on_failed else ErrorCode.NONE)


async def test_after_a_restart_with_the_dir_still_failed_its_replicas_stay_offline(
        cluster: Cluster) -> None:
    await cluster.create_topic(TOPIC, [1], PARTITIONS)
    await produce(cluster, 1)
    good, bad = dirs_of(cluster)
    on_bad = set(expected(cluster, bad, 2))
    bad.rename(bad.with_name("disk1.failed"))
    bad.write_text("a file where the log dir was")

    await cluster.restart_node(1)

    assert manager(cluster).offline == on_bad
    assert set(manager(cluster).offline_replicas()) == on_bad
    assert sorted(p.name for p in good.iterdir() if p.name.startswith(TOPIC)) == \
        sorted(str(tp) for tp in set(expected(cluster, good, 2)))
    # A replica assigned from now on is new: it is created in the dir that works.
    await cluster.create_topic("fresh", [1], 2)
    assert {d.path for tp, d in manager(cluster).placement.items() if tp.topic == "fresh"} \
        == {good}
