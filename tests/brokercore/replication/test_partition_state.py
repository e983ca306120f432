"""The leader's view of its followers, driven by a fake clock: no sockets, no tasks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from brokercore.clock import FakeClock
from brokercore.log import LogConfig, PartitionLog
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.checkpoint import read_offsets, write_offsets
from brokercore.replication.partition import Partition, PartitionError
from brokercore.topic_partition import TopicPartition
from tests.brokercore.wire import record_batch

TP = TopicPartition("orders", 0)
LAG_MS = 10_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def leader(tmp_path: Path, clock: FakeClock, isr: list[int], replicas: list[int] | None = None,
           high_watermark: int = 0, records: int = 0) -> Partition:
    plog = PartitionLog.open(tmp_path / str(TP), LogConfig(), clock)
    for i in range(records):
        plog.append_as_leader(record_batch([b"old-%d" % i]), 0)
    partition = Partition(TP, "id", plog, node_id=1, high_watermark=high_watermark)
    partition.become_leader(1, 0, replicas or [1, 2, 3], isr, clock.time_ms())
    return partition


def append(partition: Partition, count: int = 1) -> int:
    result = partition.append_as_leader(record_batch([b"v"] * count))
    return result.last_offset


def test_a_lone_leader_commits_at_once(tmp_path: Path, clock: FakeClock) -> None:
    partition = leader(tmp_path, clock, isr=[1], replicas=[1])
    append(partition, 3)
    assert partition.high_watermark == partition.log_end_offset == 3


def test_high_watermark_is_the_smallest_log_end_over_the_isr(tmp_path: Path,
                                                            clock: FakeClock) -> None:
    partition = leader(tmp_path, clock, isr=[1, 2, 3])
    append(partition, 5)
    assert partition.high_watermark == 0
    partition.update_follower_fetch(2, 5, 0, clock.time_ms())
    assert partition.high_watermark == 0  # 3 has not fetched in this epoch
    partition.update_follower_fetch(3, 2, 0, clock.time_ms())
    assert partition.high_watermark == 2
    partition.update_follower_fetch(3, 5, 0, clock.time_ms())
    assert partition.high_watermark == 5


def test_new_leader_keeps_its_old_high_watermark_until_followers_report(
    tmp_path: Path, clock: FakeClock
) -> None:
    partition = leader(tmp_path, clock, isr=[1, 2], replicas=[1, 2], high_watermark=4, records=10)
    assert partition.high_watermark == 4
    partition.update_follower_fetch(2, 7, 0, clock.time_ms())
    assert partition.high_watermark == 7


def test_high_watermark_never_goes_down(tmp_path: Path, clock: FakeClock) -> None:
    partition = leader(tmp_path, clock, isr=[1, 2], replicas=[1, 2])
    append(partition, 4)
    partition.update_follower_fetch(2, 4, 0, clock.time_ms())
    assert partition.high_watermark == 4
    partition.update_follower_fetch(2, 1, 0, clock.time_ms())
    assert partition.high_watermark == 4


def test_a_follower_that_stops_fetching_falls_out_after_the_lag_time(
    tmp_path: Path, clock: FakeClock
) -> None:
    partition = leader(tmp_path, clock, isr=[1, 2, 3])
    append(partition)
    partition.update_follower_fetch(2, 1, 0, clock.time_ms())
    clock.advance(LAG_MS / 1000 - 1)
    partition.update_follower_fetch(2, 1, 0, clock.time_ms())
    assert partition.out_of_sync_replicas(clock.time_ms(), LAG_MS) == []
    clock.advance(2)
    assert partition.out_of_sync_replicas(clock.time_ms(), LAG_MS) == [3]


def test_a_follower_that_fetches_but_never_reaches_the_log_end_falls_out(
    tmp_path: Path, clock: FakeClock
) -> None:
    partition = leader(tmp_path, clock, isr=[1, 2], replicas=[1, 2])
    for _ in range(12):
        append(partition)  # the leader keeps moving faster than the follower
        partition.update_follower_fetch(2, partition.log_end_offset - 1, 0, clock.time_ms())
        clock.advance(1)
    # Each fetch reached where the leader was at the previous fetch: still caught up.
    assert partition.out_of_sync_replicas(clock.time_ms(), LAG_MS) == []
    for _ in range(12):
        append(partition, 5)
        partition.update_follower_fetch(2, 1, 0, clock.time_ms())  # stuck
        clock.advance(1)
    assert partition.out_of_sync_replicas(clock.time_ms(), LAG_MS) == [2]


def test_a_follower_joins_the_isr_when_it_reaches_the_high_watermark(
    tmp_path: Path, clock: FakeClock
) -> None:
    partition = leader(tmp_path, clock, isr=[1, 2], replicas=[1, 2, 3])
    append(partition, 4)
    partition.update_follower_fetch(2, 4, 0, clock.time_ms())
    partition.update_follower_fetch(3, 3, 0, clock.time_ms())
    assert not partition.may_join_isr(3)
    partition.update_follower_fetch(3, 4, 0, clock.time_ms())
    assert partition.may_join_isr(3)
    assert not partition.may_join_isr(2)  # already in


def test_a_pending_expansion_counts_for_the_high_watermark_and_a_shrink_does_not(
    tmp_path: Path, clock: FakeClock
) -> None:
    partition = leader(tmp_path, clock, isr=[1, 2], replicas=[1, 2, 3])
    append(partition, 4)
    partition.update_follower_fetch(2, 4, 0, clock.time_ms())
    partition.update_follower_fetch(3, 4, 0, clock.time_ms())
    partition.pending_isr = [1, 2, 3]
    append(partition, 1)
    partition.update_follower_fetch(2, 5, 0, clock.time_ms())
    assert partition.high_watermark == 4  # 3 counts while its joining is in flight
    partition.pending_isr = [1]
    assert partition.maximal_isr == [1, 2]


def test_a_replica_outside_the_assignment_is_not_recorded(tmp_path: Path,
                                                          clock: FakeClock) -> None:
    partition = leader(tmp_path, clock, isr=[1, 2], replicas=[1, 2])
    assert not partition.update_follower_fetch(7, 0, 0, clock.time_ms())


async def test_wait_until_replicated_answers_each_way(tmp_path: Path, clock: FakeClock) -> None:
    partition = leader(tmp_path, clock, isr=[1, 2, 3])
    partition.min_insync_replicas = 2
    last = append(partition)
    assert await partition.wait_until_replicated(last, 0.01) == ErrorCode.REQUEST_TIMED_OUT

    waiting = asyncio.create_task(partition.wait_until_replicated(last, 10))
    await asyncio.sleep(0)
    partition.update_follower_fetch(2, 1, 0, clock.time_ms())
    partition.update_follower_fetch(3, 1, 0, clock.time_ms())
    assert await waiting == ErrorCode.NONE

    last = append(partition)
    waiting = asyncio.create_task(partition.wait_until_replicated(last, 10))
    await asyncio.sleep(0)
    partition.become_leader(1, 1, [1, 2, 3], [1], clock.time_ms())  # the ISR shrank to us
    assert await waiting == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    last = append(partition)
    partition.become_leader(1, 2, [1, 2, 3], [1, 2, 3], clock.time_ms())
    waiting = asyncio.create_task(partition.wait_until_replicated(last + 1, 10))
    await asyncio.sleep(0)
    partition.become_follower(2, 2, 3, [1, 2, 3], [1, 2, 3])
    assert await waiting == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_becoming_leader_records_the_epoch_for_followers_to_ask_about(
    tmp_path: Path, clock: FakeClock
) -> None:
    partition = leader(tmp_path, clock, isr=[1, 2], replicas=[1, 2], records=3)
    partition.become_follower(2, 2, 1, [1, 2], [1, 2])
    partition.become_leader(5, 2, [1, 2], [1, 2], clock.time_ms())
    assert partition.log.end_offset_for_epoch(3) == (0, 3)
    assert partition.log.latest_epoch() == 5


def test_a_log_dir_checkpoint_round_trips_in_kafkas_format(tmp_path: Path) -> None:
    offsets = {TopicPartition("b-topic", 1): 7, TopicPartition("a.topic", 0): 0}
    path = tmp_path / "replication-offset-checkpoint"
    write_offsets(path, offsets)
    assert path.read_text() == "0\n2\na.topic 0 0\nb-topic 1 7\n"
    assert read_offsets(path) == offsets
    path.write_text("0\n5\nbroken\n")
    assert read_offsets(path) == {}
    path.write_text("0\n2\na.topic 0 0\nb-to")  # torn
    assert read_offsets(path) == {}


async def test_followers_found_out_of_sync_count_against_min_insync_before_the_isr_shrinks(
    tmp_path: Path, clock: FakeClock,
) -> None:
    # The controller cannot shrink the ISR while the metadata quorum is lost; the leader's
    # own lag check still decides what acks=all is told.
    partition = leader(tmp_path, clock, isr=[1, 2, 3])
    partition.min_insync_replicas = 2
    last = append(partition)
    waiting = asyncio.create_task(partition.wait_until_replicated(last, 10))
    await asyncio.sleep(0)
    clock.advance((LAG_MS + 1) / 1000)
    partition.mark_out_of_sync(partition.out_of_sync_replicas(clock.time_ms(), LAG_MS))

    assert partition.isr == [1, 2, 3]
    assert await waiting == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    with pytest.raises(PartitionError) as refused:
        partition.check_min_insync_replicas()
    assert refused.value.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert "out of sync: [2, 3]" in str(refused.value)

    partition.update_follower_fetch(2, partition.log_end_offset, 0, clock.time_ms())
    assert partition.out_of_sync == {3}
    partition.check_min_insync_replicas()  # 1 and 2 are in sync again
    assert partition.high_watermark <= last  # 3 is still in the ISR: nothing more committed
