"""Snapshots in the simulated quorum: restarts replay only the tail, and a voter behind the
leader's log start fetches the leader's snapshot (FetchSnapshot), in chunks."""

from __future__ import annotations

from brokercore.clock import FakeClock
from brokercore.controller.raft_snapshots import SnapshotPolicy

from .harness import Cluster


def _commit_everywhere(cluster: Cluster, count: int) -> int:
    first = cluster.propose(count)
    assert first is not None
    live = sorted(cluster.nodes)
    assert cluster.run_until(lambda: cluster.committed_on(live, first + count - 1))
    return first + count - 1


def test_a_voter_behind_the_leaders_log_start_fetches_its_snapshot() -> None:
    cluster = Cluster(3, seed=31)
    leader = cluster.wait_for_leader()
    lagging = next(i for i in cluster.ids if i != leader.node_id)
    _commit_everywhere(cluster, 20)
    cluster.crash(lagging)
    for _ in range(2):  # the second moves the log start to the first's end
        _commit_everywhere(cluster, 40)
        assert cluster.snapshot(leader.node_id) is not None
    assert leader.log_start_offset > cluster.storages[lagging].start_offset + len(
        cluster.storages[lagging].entries)
    last = _commit_everywhere(cluster, 5)
    node = cluster.start(lagging)
    assert cluster.run_until(lambda: node.commit_offset >= last)
    cluster.run(1.0)
    assert node.storage.snapshot == leader.storage.snapshot
    assert cluster.applied[lagging] == cluster.applied[leader.node_id]
    cluster.check_all()


def test_a_voter_whose_storage_was_lost_catches_up_from_the_snapshot() -> None:
    cluster = Cluster(3, seed=37)
    leader = cluster.wait_for_leader()
    for _ in range(2):
        _commit_everywhere(cluster, 30)
        cluster.snapshot(leader.node_id)
    wiped = next(i for i in cluster.ids if i != leader.node_id)
    cluster.crash(wiped)
    cluster.wipe(wiped)
    node = cluster.start(wiped)
    last = _commit_everywhere(cluster, 3)
    assert node.commit_offset >= last and node.log_start_offset > 0
    assert [r for _, r in cluster.applied[wiped]] == [
        r for _, r in cluster.applied[leader.node_id]]


def test_a_restart_restores_the_snapshot_and_replays_only_the_tail() -> None:
    cluster = Cluster(1)
    leader = cluster.wait_for_leader()
    _commit_everywhere(cluster, 50)
    snapshot = cluster.snapshot(1)
    assert snapshot is not None and snapshot.end_offset == leader.end_offset
    _commit_everywhere(cluster, 5)
    before = list(cluster.applied[1])
    cluster.crash(1)
    cluster.start(1)
    cluster.wait_for_leader()
    cluster.run(0.5)
    assert cluster.applied[1] == before
    assert cluster.replayed[1] == [offset for offset, _ in before[-5:]]


def test_a_snapshot_is_taken_only_past_the_latest_one() -> None:
    cluster = Cluster(1)
    cluster.wait_for_leader()
    _commit_everywhere(cluster, 3)
    assert cluster.snapshot(1) is not None
    assert cluster.snapshot(1) is None


def test_the_policy_snapshots_after_enough_bytes_or_after_the_interval_with_news() -> None:
    clock = FakeClock()
    policy = SnapshotPolicy(max_bytes=100, interval=60.0, now=clock.monotonic)
    record = {"type": "topic", "name": "t" * 40, "topic_id": "x"}  # 71 bytes with newline
    policy.applied(record)
    assert not policy.due()
    policy.applied(record)
    assert policy.due()
    policy.taken()
    clock.advance(120)
    assert not policy.due()  # nothing new to put in a snapshot
    policy.applied(record)
    assert policy.due()  # the interval passed with a record not in any snapshot
