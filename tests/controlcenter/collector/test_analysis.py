"""Analyzer alone: a settled window is kept, and what changes still changes its rows."""

from __future__ import annotations

from clusterclient import Broker, ClusterMetadata, ConsumerGroup, GroupState, TopicPartition
from clusterclient.metadata import PartitionMetadata, TopicMetadata
from controlcenter.collector.analysis import Analyzer
from controlcenter.collector.sampler import Reading

TP = TopicPartition("t", 0)
META = ClusterMetadata("c", 1, (Broker(1, "127.0.0.1", 9092),), {
    "t": TopicMetadata("t", False, (PartitionMetadata("t", 0, 1, (1,), (1,)),))})
GROUP = ConsumerGroup("g", False, GroupState.EMPTY, "", None, ())


def reading(at: float, committed: int, end: int) -> Reading:
    return Reading(at=at, metadata=META, log_start={TP: 0}, log_end={TP: end},
                   groups={"g": GROUP}, committed={"g": {TP: committed}}, min_isr={})


def test_a_stopped_consumers_window_settles_and_a_new_end_or_commit_still_shows() -> None:
    analyzer = Analyzer()
    key = ("g", "t", 0)
    for i in range(12):  # nobody commits: the end ring fills with 100, the window settles
        snap = analyzer.analyze(reading(5.0 * i, 90, 100 if i else 95))
    settled = analyzer.windows[key]
    snap = analyzer.analyze(reading(60.0, 90, 100))
    assert analyzer.windows[key] is settled
    assert snap.group_partitions[key]["status"] == "STOP"
    assert snap.groups["g"]["status"] == "ERR" and snap.groups["g"]["max_lag"] == 10

    snap = analyzer.analyze(reading(65.0, 90, 101))  # a new end offset
    assert analyzer.windows[key] is not settled
    assert analyzer.windows[key].end_offsets[-1] == 101
    assert snap.group_partitions[key]["end_offset"] == 101
    assert snap.group_partitions[key]["lag"] == 11
    assert snap.lag_samples[-1].end_offset == 101

    snap = analyzer.analyze(reading(70.0, 101, 101))  # the consumer catches up
    assert snap.group_partitions[key] | {"lag_seconds": None} == {
        "committed_offset": 101, "end_offset": 101, "lag": 0, "lag_seconds": None,
        "status": "OK", "consumer_id": "", "client_id": "", "host": ""}
    assert snap.group_partitions[key]["lag_seconds"] == 0.0
    assert (snap.groups["g"]["status"], snap.groups["g"]["total_lag"]) == ("OK", 0)
