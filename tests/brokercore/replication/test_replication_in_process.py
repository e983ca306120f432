"""Replication between real Kafka listeners in one process; the test plays the controller."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from brokercore.controller.image import Record
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.partition import Partition
from tests.brokercore.log.builders import values_in
from tests.brokercore.wire import record_batch

from .harness import Client, Cluster, eventually

TOPIC = "orders"


@pytest.fixture
async def make_cluster(tmp_path: Path) -> AsyncIterator[Callable[..., Cluster]]:
    clusters: list[Cluster] = []

    def make(size: int = 3, **overrides: str) -> Cluster:
        cluster = Cluster(tmp_path, size, {k.replace("_", "."): v for k, v in overrides.items()})
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        await cluster.stop()


def everything(partition: Partition) -> bytes:
    return bytes(partition.log.read(partition.log_start_offset, 2**30).records)


def values(partition: Partition) -> list[bytes | None]:
    return [value for _, _, value in values_in(everything(partition))]


async def test_followers_hold_the_leaders_batches_and_acks_all_waits_for_them(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = await make_cluster().start()
    await cluster.create_topic(TOPIC, [1, 2, 3])
    client = await Client.to(cluster.nodes[1])
    for i in range(5):
        response = await client.produce(TOPIC, record_batch([b"m%d-a" % i, b"m%d-b" % i]))
        assert response.error_code == ErrorCode.NONE
        assert response.base_offset == 2 * i
        # acks=all answered: every ISR member has the batch.
        for node in cluster.nodes.values():
            assert node.partition(TOPIC).log_end_offset >= 2 * i + 2
    leader = cluster.nodes[1].partition(TOPIC)
    assert leader.high_watermark == 10
    for node_id in (2, 3):
        follower = cluster.nodes[node_id].partition(TOPIC)
        assert everything(follower) == everything(leader)  # same bytes, offsets and epochs
        await eventually(lambda: follower.high_watermark == 10,  # noqa: B023  awaited here
                         "follower learns the HW")
    assert leader.messages_in == 10 and leader.bytes_in > 0
    client.close()


async def test_consumers_read_only_below_the_high_watermark(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = await make_cluster(replica_lag_time_max_ms="600000").start()
    await cluster.create_topic(TOPIC, [1, 2, 3])
    client = await Client.to(cluster.nodes[1])
    assert (await client.produce(TOPIC, record_batch([b"committed"]))).error_code == 0
    await cluster.stop_node(3)
    response = await client.produce(TOPIC, record_batch([b"uncommitted"]), acks=1)
    assert response.error_code == ErrorCode.NONE and response.base_offset == 1
    leader = cluster.nodes[1].partition(TOPIC)
    assert (leader.high_watermark, leader.log_end_offset) == (1, 2)

    fetched = await client.fetch(TOPIC, 0)
    assert fetched.high_watermark == 1
    assert [v for _, _, v in values_in(fetched.records)] == [b"committed"]
    between = await client.fetch(TOPIC, 1)  # between HW and LEO: empty, not out of range
    assert between.error_code == ErrorCode.NONE and not between.records
    latest = await client.latest(TOPIC)
    assert latest.offset == 1
    assert leader.bytes_out > 0

    # A follower reads past the high watermark: it fetches the log end.
    follower_view = await client.fetch(TOPIC, 1, replica_id=2)
    assert [v for _, _, v in values_in(follower_view.records)] == [b"uncommitted"]
    client.close()


async def test_only_the_leader_serves_produce_and_consumer_fetch(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = await make_cluster().start()
    await cluster.create_topic(TOPIC, [1, 2, 3])
    client = await Client.to(cluster.nodes[2])
    assert (await client.produce(TOPIC, record_batch([b"x"]))).error_code == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (await client.fetch(TOPIC, 0)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (await client.latest(TOPIC)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    client.close()


async def test_acks_all_is_refused_when_the_isr_is_below_min_insync_replicas(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = await make_cluster().start()
    await cluster.create_topic(TOPIC, [1, 2, 3], configs={"min.insync.replicas": "2"})
    await cluster.stop_node(2)
    await cluster.stop_node(3)
    client = await Client.to(cluster.nodes[1])
    leader = cluster.nodes[1].partition(TOPIC)
    # Written before the ISR shrinks: appended, then the wait ends on the shrunken ISR.
    response = await client.produce(TOPIC, record_batch([b"late"]), timeout_ms=30000)
    assert response.error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert leader.isr == [1]
    end = leader.log_end_offset
    response = await client.produce(TOPIC, record_batch([b"refused"]))
    assert response.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.log_end_offset == end  # refused before appending
    assert (await client.produce(TOPIC, record_batch([b"one"]), acks=1)).error_code == 0
    client.close()


async def test_acks_all_times_out_while_the_isr_cannot_change(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = await make_cluster(replica_lag_time_max_ms="600000").start()
    await cluster.create_topic(TOPIC, [1, 2])
    await cluster.stop_node(2)
    client = await Client.to(cluster.nodes[1])
    response = await client.produce(TOPIC, record_batch([b"x"]), timeout_ms=200)
    assert response.error_code == ErrorCode.REQUEST_TIMED_OUT
    client.close()


async def test_a_stopped_follower_leaves_the_isr_and_rejoins_after_restart(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = await make_cluster().start()
    await cluster.create_topic(TOPIC, [1, 2, 3], configs={"min.insync.replicas": "2"})
    client = await Client.to(cluster.nodes[1])
    leader = cluster.nodes[1].partition(TOPIC)
    await cluster.stop_node(3)
    await eventually(lambda: leader.isr == [1, 2], "3 leaves the ISR")
    for i in range(3):
        assert (await client.produce(TOPIC, record_batch([b"while-down-%d" % i]))).error_code == 0
    node = await cluster.restart_node(3)
    await eventually(lambda: leader.isr == [1, 2, 3], "3 rejoins the ISR")
    assert everything(node.partition(TOPIC)) == everything(leader)
    assert cluster.registration(TOPIC).isr == [1, 2, 3]
    client.close()


async def test_a_returning_old_leader_truncates_its_divergent_tail(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = await make_cluster(replica_lag_time_max_ms="600000").start()
    await cluster.create_topic(TOPIC, [1, 2, 3])
    client = await Client.to(cluster.nodes[1])
    assert (await client.produce(TOPIC, record_batch([b"a", b"b"]))).error_code == 0
    await cluster.stop_node(2)
    await cluster.stop_node(3)
    for value in (b"lost-1", b"lost-2"):  # acks=1: only the old leader ever has these
        assert (await client.produce(TOPIC, record_batch([value]), acks=1)).error_code == 0
    client.close()
    await cluster.stop_node(1)

    await cluster.restart_node(2)
    await cluster.restart_node(3)
    cluster.change_leader(TOPIC, 2, isr=[2, 3])
    client = await Client.to(cluster.nodes[2])
    assert (await client.produce(TOPIC, record_batch([b"new-1", b"new-2", b"new-3"]))).error_code \
        == 0
    old = await cluster.restart_node(1)
    new_leader = cluster.nodes[2].partition(TOPIC)
    await eventually(lambda: old.partition(TOPIC).log_end_offset == new_leader.log_end_offset,
                     "the old leader catches up")
    assert values(old.partition(TOPIC)) == [b"a", b"b", b"new-1", b"new-2", b"new-3"]
    assert everything(old.partition(TOPIC)) == everything(new_leader)
    assert old.partition(TOPIC).log.end_offset_for_epoch(0) == (0, 2)
    await eventually(lambda: new_leader.isr == [2, 3, 1], "the old leader rejoins the ISR")
    client.close()


async def test_a_new_leader_withholds_offsets_until_its_high_watermark_reaches_its_epoch(
    make_cluster: Callable[..., Cluster],
) -> None:
    """KIP-207: "latest" from a new leader never goes below what the old leader answered."""
    cluster = await make_cluster(replica_lag_time_max_ms="600000").start()
    await cluster.create_topic(TOPIC, [1, 2, 3])
    client = await Client.to(cluster.nodes[1])
    assert (await client.produce(TOPIC, record_batch([b"a"]))).error_code == 0
    await cluster.stop_node(3)
    assert (await client.produce(TOPIC, record_batch([b"b"]), acks=1)).error_code == 0
    client.close()
    follower = cluster.nodes[2].partition(TOPIC)
    await eventually(lambda: follower.log_end_offset == 2, "2 fetches b")
    await cluster.stop_node(1)
    cluster.change_leader(TOPIC, 2, isr=[2, 3])  # 3 is down: the new leader's HW is held
    leader = cluster.nodes[2].partition(TOPIC)
    assert (leader.high_watermark, leader.leader_epoch_start_offset) == (1, 2)

    client = await Client.to(cluster.nodes[2])
    assert (await client.latest(TOPIC)).error_code == ErrorCode.OFFSET_NOT_AVAILABLE
    # A timestamp lookup is answered when it lands below the HW, and withheld otherwise:
    # a later record may be committed, but this leader cannot tell yet.
    below = await client.list_offsets(TOPIC, 0)
    assert (below.error_code, below.offset) == (ErrorCode.NONE, 0)
    beyond = await client.list_offsets(TOPIC, 2_000_000_000_000)
    assert beyond.error_code == ErrorCode.OFFSET_NOT_AVAILABLE
    assert (await client.list_offsets(TOPIC, -2)).offset == 0

    await cluster.restart_node(3)
    await eventually(lambda: leader.high_watermark == 2, "3 catches up and the HW moves")
    latest = await client.latest(TOPIC)
    assert (latest.error_code, latest.offset) == (ErrorCode.NONE, 2)
    client.close()


async def test_delete_records_answers_once_every_live_replica_has_moved_its_log_start(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = await make_cluster(replica_lag_time_max_ms="600000").start()
    await cluster.create_topic(TOPIC, [1, 2, 3])
    client = await Client.to(cluster.nodes[1])
    for i in range(6):
        assert (await client.produce(TOPIC, record_batch([b"v%d" % i]))).error_code == 0
    deleted = await client.delete_records(TOPIC, 3)
    assert (deleted.error_code, deleted.low_watermark) == (ErrorCode.NONE, 3)
    # Answered only now that no replica could serve offsets 0-2 as a future leader.
    assert [n.partition(TOPIC).log_start_offset for n in cluster.nodes.values()] == [3, 3, 3]

    await cluster.stop_node(3)  # down but not fenced: still counted, so the wait runs out
    stalled = await client.delete_records(TOPIC, 5, timeout_ms=300)
    assert (stalled.error_code, stalled.low_watermark) == (ErrorCode.REQUEST_TIMED_OUT, -1)
    assert cluster.nodes[1].partition(TOPIC).log_start_offset == 5  # done on the leader
    cluster.apply({"type": "fence_broker", "node_id": 3, "fenced": True})
    fenced = await client.delete_records(TOPIC, 5)  # a fenced replica is not waited for
    assert (fenced.error_code, fenced.low_watermark) == (ErrorCode.NONE, 5)
    assert cluster.nodes[2].partition(TOPIC).log_start_offset == 5
    client.close()


async def test_high_watermarks_survive_a_restart(make_cluster: Callable[..., Cluster]) -> None:
    cluster = await make_cluster(replica_lag_time_max_ms="600000").start()
    await cluster.create_topic(TOPIC, [1, 2])
    client = await Client.to(cluster.nodes[1])
    assert (await client.produce(TOPIC, record_batch([b"a", b"b", b"c"]))).error_code == 0
    client.close()
    follower = cluster.nodes[2].partition(TOPIC)
    await eventually(lambda: follower.high_watermark == 3, "follower learns the HW")
    await cluster.stop_node(1)  # the follower cannot learn it again from the leader
    node = await cluster.restart_node(2)
    assert node.partition(TOPIC).high_watermark == 3
    text = (cluster.data_dir / "broker-2" / "replication-offset-checkpoint").read_text()
    assert f"{TOPIC} 0 3" in text.splitlines()


async def test_a_follower_behind_the_leaders_log_start_starts_over_there(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = await make_cluster(2, replica_lag_time_max_ms="600000").start()
    await cluster.create_topic(TOPIC, [1, 2])
    client = await Client.to(cluster.nodes[1])
    assert (await client.produce(TOPIC, record_batch([b"0", b"1"]))).error_code == 0
    await cluster.stop_node(2)
    for i in range(2, 6):
        assert (await client.produce(TOPIC, record_batch([b"%d" % i]), acks=1)).error_code == 0
    leader = cluster.nodes[1].partition(TOPIC)
    leader.log.delete_records_before(4)  # as DeleteRecords or retention would
    node = await cluster.restart_node(2)
    follower = node.partition(TOPIC)
    await eventually(lambda: follower.log_end_offset == 6, "the follower catches up")
    assert follower.log_start_offset == 4
    assert values(follower) == [b"4", b"5"]
    # The leader learns the follower's new log end from its next fetch.
    await eventually(lambda: leader.high_watermark == 6, "the high watermark moves")
    client.close()


async def test_a_deleted_topic_releases_acks_all_waiters(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = await make_cluster(2, replica_lag_time_max_ms="600000").start()
    topic_id = await cluster.create_topic(TOPIC, [1, 2])
    await cluster.stop_node(2)
    leader = cluster.nodes[1].partition(TOPIC)
    last = leader.append_as_leader(record_batch([b"x"])).last_offset
    waiting = asyncio.ensure_future(leader.wait_until_replicated(last, 60))
    await asyncio.sleep(0)
    cluster.apply({"type": "remove_topic", "topic_id": topic_id, "name": TOPIC})
    assert await waiting == ErrorCode.NOT_LEADER_OR_FOLLOWER


def epoch_bump(cluster: Cluster, topic_id: str) -> Record:
    """The same leader at the next epoch, as after a leader change and back."""
    current = cluster.registration(TOPIC)
    record: Record = {"type": "partition_change", "topic_id": topic_id, "partition": 0,
              "leader": current.leader, "leader_epoch": current.leader_epoch + 1}
    cluster.history.append(record)
    return record


async def test_a_follower_fenced_by_its_leader_waits_for_newer_metadata(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = await make_cluster(2, replica_lag_time_max_ms="600000").start()
    topic_id = await cluster.create_topic(TOPIC, [1, 2])
    record = epoch_bump(cluster, topic_id)
    offset = len(cluster.history) - 1
    cluster.nodes[1].apply(record, offset)  # the leader moves on; the follower lags behind
    client = await Client.to(cluster.nodes[1])
    assert (await client.produce(TOPIC, record_batch([b"x"]), acks=1)).error_code == 0
    fetcher = cluster.nodes[2].replica_manager.fetchers[1]
    tp = cluster.nodes[2].partition(TOPIC).tp
    await eventually(lambda: fetcher.partitions[tp].parked, "the follower parks the partition")
    assert cluster.nodes[2].partition(TOPIC).log_end_offset == 0
    cluster.nodes[2].apply(record, offset)
    await eventually(lambda: cluster.nodes[2].partition(TOPIC).log_end_offset == 1,
                     "the follower fetches at the new epoch")
    client.close()


async def test_a_follower_ahead_of_its_leaders_metadata_retries_until_it_catches_up(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = await make_cluster(2, replica_lag_time_max_ms="600000").start()
    topic_id = await cluster.create_topic(TOPIC, [1, 2])
    client = await Client.to(cluster.nodes[1])
    assert (await client.produce(TOPIC, record_batch([b"x"]), acks=1)).error_code == 0
    await eventually(lambda: cluster.nodes[2].partition(TOPIC).log_end_offset == 1, "copied")
    record = epoch_bump(cluster, topic_id)
    offset = len(cluster.history) - 1
    cluster.nodes[2].apply(record, offset)  # the follower learns the new epoch first
    fetcher = cluster.nodes[2].replica_manager.fetchers[1]
    tp = cluster.nodes[2].partition(TOPIC).tp
    await eventually(lambda: fetcher.partitions[tp].delayed_until > 0,
                     "the leader answers UNKNOWN_LEADER_EPOCH and the follower backs off")
    assert not fetcher.partitions[tp].parked
    cluster.nodes[1].apply(record, offset)
    assert (await client.produce(TOPIC, record_batch([b"y"]), acks=-1)).error_code == 0
    assert cluster.nodes[2].partition(TOPIC).log_end_offset == 2
    client.close()


async def test_bogus_replica_fetches_get_errors_and_move_nothing(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = await make_cluster(2, replica_lag_time_max_ms="600000").start()
    await cluster.create_topic(TOPIC, [1, 2])
    await cluster.stop_node(2)
    client = await Client.to(cluster.nodes[1])
    assert (await client.produce(TOPIC, record_batch([b"x"]), acks=1)).error_code == 0
    leader = cluster.nodes[1].partition(TOPIC)
    # Broker 2 may have fetched once (at 0) before it stopped; nothing below may add to that.
    before = leader.followers[2].log_end_offset
    assert before in (-1, 0)
    stranger = await client.fetch(TOPIC, 1, replica_id=99)
    assert stranger.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    beyond = await client.fetch(TOPIC, 50, replica_id=2)  # past the leader's log end
    assert beyond.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    negative = await client.fetch(TOPIC, -5, replica_id=2)
    assert negative.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert leader.high_watermark == 0 and leader.isr == [1, 2]
    assert leader.followers[2].log_end_offset == before  # none of it counted as progress
    assert (await client.latest(TOPIC)).offset == 0  # and the broker serves on
    client.close()


def topic_records(name: str, topic_id: str, partitions: int, leader: int) -> list[Record]:
    return [{"type": "topic", "name": name, "topic_id": topic_id}] + [
        {"type": "partition", "topic_id": topic_id, "partition": p, "replicas": [leader],
         "isr": [leader], "leader": leader, "leader_epoch": 0} for p in range(partitions)]


async def test_records_applied_while_logs_open_win(
    make_cluster: Callable[..., Cluster],
) -> None:
    """Logs open on threads after the records that asked for them: a topic deleted and
    created again under its name meanwhile, and a leader epoch moved meanwhile, are what
    the broker ends up hosting."""
    cluster = await make_cluster(1).start()
    node = cluster.nodes[1]
    hosted = node.replica_manager.partitions
    cluster.apply(*topic_records("gone", "old-id", 120, 1))
    # The first batch is hosted, the second on the threads, the third still queued.
    await eventually(lambda: len(hosted) > 0, "the first logs open")
    node.partition("gone", 0).append_as_leader(record_batch([b"old"]))
    cluster.apply({"type": "remove_topic", "topic_id": "old-id", "name": "gone"})
    cluster.apply(*topic_records("gone", "new-id", 60, 1))
    cluster.apply({"type": "partition_change", "topic_id": "new-id", "partition": 59,
                   "leader": 1, "leader_epoch": 3})
    await node.replica_manager.settled()

    assert sorted(tp.partition for tp in hosted) == list(range(60))
    assert {p.topic_id for p in hosted.values()} == {"new-id"}
    assert sorted(d.name for d in node.replica_manager.log_dirs[0].path.glob("gone-*")) == \
        sorted(f"gone-{p}" for p in range(60))
    assert node.partition("gone", 59).leader_epoch == 3
    assert node.partition("gone", 0).log_end_offset == 0  # the old log went first
    client = await Client.to(node)
    try:
        answer = await client.produce("gone", record_batch([b"one"]), acks=1, index=59)
    finally:
        client.close()
    assert answer.error_code == ErrorCode.NONE
