"""The one lag computation, on crafted values (no broker)."""

from clusterclient import (
    ClusterRequestError,
    ConsumerGroup,
    GroupMember,
    GroupState,
    ListedOffset,
    ListOffsetsResult,
    TopicPartition,
    group_lag,
)

A0, A1, A2 = (TopicPartition("a", p) for p in range(3))


def ends(**offsets: int) -> ListOffsetsResult:
    return ListOffsetsResult({TopicPartition("a", int(k[1:])): ListedOffset(v, -1, None)
                              for k, v in offsets.items()})


def group(*members: GroupMember) -> ConsumerGroup:
    return ConsumerGroup("g", False, GroupState.STABLE, "range", None, members)


def test_lag_is_end_minus_committed_and_never_negative() -> None:
    lag = group_lag(group(), {A0: 4, A1: 12}, ends(p0=10, p1=11))
    assert [(p.committed_offset, p.log_end_offset, p.lag) for p in lag.partitions] == [
        (4, 10, 6), (12, 11, 0)]
    assert (lag.total_lag, lag.max_lag, lag.max_lag_partition) == (6, 6, lag.partitions[0])


def test_an_assigned_partition_without_a_commit_has_no_lag_but_an_owner() -> None:
    m = GroupMember("m-1", "static-1", "client", "/10.0.0.1", (A2,))
    lag = group_lag(group(m), {A0: 1}, ends(p0=1, p2=7))
    row = lag.partitions[1]
    assert (row.topic_partition, row.committed_offset, row.lag, row.member) == (A2, None, None, m)
    assert lag.partitions[0].member is None


def test_an_unreadable_end_offset_leaves_lag_unknown_and_reports_the_error() -> None:
    problem = ClusterRequestError(5, "LEADER_NOT_AVAILABLE", "no leader", "a", 1)
    answer = ListOffsetsResult({A0: ListedOffset(3, -1, None)}, {A1: problem})
    lag = group_lag(group(), {A0: 1, A1: 1}, answer)
    assert [p.lag for p in lag.partitions] == [2, None]
    assert lag.errors == {A1: problem} and lag.total_lag == 2


def test_a_group_without_offsets_has_zero_lag() -> None:
    lag = group_lag(group(), {}, ListOffsetsResult())
    assert (lag.partitions, lag.total_lag, lag.max_lag, lag.max_lag_partition) == ((), 0, 0, None)
