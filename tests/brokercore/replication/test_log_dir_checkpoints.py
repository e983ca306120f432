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
from brokercore.replication.checkpoint import read_offsets, write_offsets
from brokercore.replication.replica_manager import ReplicaManager
from brokercore.topic_partition import TopicPartition
from tests.brokercore.wire import record_batch

from .harness import Client, Cluster, eventually

TOPIC = "hw"
PARTITIONS = 4
FILE = "replication-offset-checkpoint"


def read_high_watermarks(log_dir: Path) -> dict[TopicPartition, int]:
    return read_offsets(log_dir / FILE)


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
    await manager(cluster).checkpoints.write(manager(cluster).checkpoints.high_watermarks)

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
    write_offsets(dirs[0] / FILE, everything)  # as earlier versions did, in the first dir

    await cluster.restart_node(1)

    assert high_watermarks(cluster) == {p: 2 * (p + 1) for p in range(PARTITIONS)}
    await manager(cluster).checkpoints.write(manager(cluster).checkpoints.high_watermarks)
    for log_dir in dirs:
        assert read_high_watermarks(log_dir) == expected(cluster, log_dir, 2)


async def test_a_dir_whose_checkpoint_fails_goes_offline_and_the_other_is_written(
        cluster: Cluster) -> None:
    await cluster.create_topic(TOPIC, [1], PARTITIONS)
    await produce(cluster, 1)
    await manager(cluster).checkpoints.write(manager(cluster).checkpoints.high_watermarks)
    good, bad = dirs_of(cluster)
    on_bad = set(expected(cluster, bad, 2))
    bad.rename(bad.with_name("disk1.failed"))
    bad.write_text("a file where the log dir was")

    await produce(cluster, 1)  # the open segments still take writes
    await manager(cluster).checkpoints.write(manager(cluster).checkpoints.high_watermarks)

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


RECOVERY_POINTS = "recovery-point-offset-checkpoint"
LOG_STARTS = "log-start-offset-checkpoint"


async def delete_records(cluster: Cluster, before: dict[int, int]) -> None:
    client = await Client.to(cluster.nodes[1])
    try:
        for p, offset in before.items():
            assert (await client.delete_records(TOPIC, offset, index=p)).error_code == 0
    finally:
        client.close()


def log_starts(cluster: Cluster) -> dict[int, int]:
    return {tp.partition: p.log.log_start_offset
            for tp, p in manager(cluster).partitions.items()}


def partition_dirs(log_dir: Path) -> list[Path]:
    return [p for p in log_dir.iterdir() if p.name.startswith(f"{TOPIC}-")]


async def stop_after_deleting_records(cluster: Cluster) -> None:
    """Partition p of TOPIC with 2(p + 1) records and its log start at p + 1, then node 1
    stopped cleanly, which flushes every log and writes both files."""
    await cluster.create_topic(TOPIC, [1], PARTITIONS)
    await produce(cluster, 1)
    await delete_records(cluster, {p: p + 1 for p in range(PARTITIONS)})
    follow_an_absent_leader(cluster)
    await cluster.stop_node(1)


async def test_each_dir_keeps_the_recovery_points_and_log_starts_of_its_partitions(
        cluster: Cluster) -> None:
    await stop_after_deleting_records(cluster)

    for log_dir in dirs_of(cluster):
        held = {TopicPartition(TOPIC, int(p.name.rsplit("-", 1)[1]))
                for p in partition_dirs(log_dir)}
        assert held
        assert read_offsets(log_dir / RECOVERY_POINTS) == {
            tp: 2 * (tp.partition + 1) for tp in held}
        assert read_offsets(log_dir / LOG_STARTS) == {tp: tp.partition + 1 for tp in held}
        for partition_dir in partition_dirs(log_dir):
            assert not (partition_dir / RECOVERY_POINTS).exists()
            assert not (partition_dir / LOG_STARTS).exists()

    await cluster.restart_node(1)
    assert log_starts(cluster) == {p: p + 1 for p in range(PARTITIONS)}


async def test_the_files_each_partition_kept_in_earlier_versions_are_read_once_then_dropped(
        cluster: Cluster) -> None:
    await stop_after_deleting_records(cluster)
    for log_dir in dirs_of(cluster):  # as earlier versions left them
        (log_dir / RECOVERY_POINTS).unlink()
        (log_dir / LOG_STARTS).unlink()
        for partition_dir in partition_dirs(log_dir):
            p = int(partition_dir.name.rsplit("-", 1)[1])
            (partition_dir / LOG_STARTS).write_text(f"0\n1\n{p + 1}\n")
            (partition_dir / RECOVERY_POINTS).write_text(f"0\n1\n{2 * (p + 1)}\n")

    await cluster.restart_node(1)

    assert log_starts(cluster) == {p: p + 1 for p in range(PARTITIONS)}
    for log_dir in dirs_of(cluster):
        assert read_offsets(log_dir / LOG_STARTS) == {
            tp: tp.partition + 1 for tp in expected(cluster, log_dir, 2)}
        for partition_dir in partition_dirs(log_dir):
            assert not (partition_dir / RECOVERY_POINTS).exists()
            assert not (partition_dir / LOG_STARTS).exists()


async def test_damaged_checkpoints_after_a_crash_count_as_missing_and_the_logs_recover(
        cluster: Cluster) -> None:
    """Kafka's rule for an unreadable recovery-point or log-start checkpoint: recover every
    log of the dir from its first segment, and start it at its first segment's base."""
    await cluster.create_topic(TOPIC, [1], PARTITIONS, {"segment.bytes": "300"})
    await produce(cluster, 1)  # partition 3: 4 batches, 8 records, 2 segments
    await delete_records(cluster, {3: 1})
    follow_an_absent_leader(cluster)
    await cluster.stop_node(1)
    [p3] = [d / f"{TOPIC}-3" for d in dirs_of(cluster) if (d / f"{TOPIC}-3").exists()]
    for partition_dir in (p for d in dirs_of(cluster) for p in partition_dirs(d)):
        (partition_dir / ".kafka_cleanshutdown").unlink()  # as a kill -9 leaves them
    first, *later = sorted(p3.glob("*.log"))
    assert later
    with first.open("r+b") as file:  # damage in a segment the checkpoint calls fsynced
        file.seek(first.stat().st_size - 1)
        file.write(b"\x00" if file.read(1) != b"\x00" else b"\x01")
    for name in (RECOVERY_POINTS, LOG_STARTS):
        path = p3.parent / name
        path.write_bytes(path.read_bytes()[:9])  # torn

    await cluster.restart_node(1)

    log3 = manager(cluster).partitions[TopicPartition(TOPIC, 3)].log
    assert log3.log_start_offset == 0  # its first segment's base: the deletion is lost
    assert log3.log_end_offset < 8  # rescanned from the start and cut at the damage
    assert len(log3.segments) == 1
    assert {p: plog.log.log_end_offset for p, plog in (
        (tp.partition, part) for tp, part in manager(cluster).partitions.items())
        if p != 3} == {p: 2 * (p + 1) for p in range(3)}


async def test_a_truncation_rewrites_the_recovery_points_without_waiting_for_the_interval(
        cluster: Cluster) -> None:
    """A recovery point left above a truncated log's end would, after a power loss, let
    records written there later pass for fsynced ones: Kafka writes the file at once."""
    await cluster.create_topic(TOPIC, [1], PARTITIONS)
    await produce(cluster, 1)
    partition = cluster.nodes[1].partition(TOPIC, 3)
    partition.log.flush()
    await manager(cluster).checkpoints.write()
    [log_dir] = [d for d in dirs_of(cluster) if (d / f"{TOPIC}-3").exists()]
    tp = TopicPartition(TOPIC, 3)
    assert read_offsets(log_dir / RECOVERY_POINTS)[tp] == 8

    partition.truncate_to(2)  # as a follower's fetcher does (the interval is 60 s)

    await eventually(lambda: read_offsets(log_dir / RECOVERY_POINTS).get(tp) == 2,
                     "the dir's recovery points are rewritten", limit=5)
