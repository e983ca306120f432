"""Replica reassignment (KIP-455) on metadata images alone."""

from __future__ import annotations

import pytest

from brokercore.controller import elections, reassignment
from brokercore.controller.elections import Rejected
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .images import TOPIC_ID, Images

TP0 = TopicPartition("t", 0)


def reassign(images: Images, target: list[int] | None, tp: TopicPartition = TP0) -> Rejected | None:
    records, results = reassignment.records_alter_partition_reassignments(
        images.image, {tp: target})
    images.write(records)
    return results[tp]


def leader_sets_isr(images: Images, isr: list[int]) -> None:
    part = images.part()
    images.write(elections.records_alter_partition(
        images.image, TOPIC_ID, 0, part.leader, part.leader_epoch, part.partition_epoch, isr))


def state(images: Images) -> tuple[list[int], list[int], int, list[int], list[int]]:
    part = images.part()
    return part.replicas, part.isr, part.leader, part.adding_replicas, part.removing_replicas


def test_a_reassignment_widens_the_replicas_and_completes_when_the_target_is_in_sync() -> None:
    images = Images(5)
    images.partition(0, [1, 2, 3])
    assert reassign(images, [4, 5, 1]) is None
    assert state(images) == ([4, 5, 1, 2, 3], [1, 2, 3], 1, [4, 5], [2, 3])
    assert reassignment.list_partition_reassignments(images.image, None) == {
        TP0: ([4, 5, 1, 2, 3], [4, 5], [2, 3])}
    leader_sets_isr(images, [1, 2, 3, 4])
    assert state(images)[3:] == ([4, 5], [2, 3])  # 5 is not in sync yet
    leader_sets_isr(images, [1, 2, 3, 4, 5])
    assert state(images) == ([4, 5, 1], [1, 4, 5], 1, [], [])
    assert images.part().leader_epoch == 0  # the leader stayed
    assert reassignment.list_partition_reassignments(images.image, None) == {}


def test_completing_a_reassignment_that_removes_the_leader_elects_a_new_one() -> None:
    images = Images(4)
    images.partition(0, [1, 2])
    reassign(images, [3, 2])
    leader_sets_isr(images, [1, 2, 3])
    part = images.part()
    assert (part.replicas, part.isr, part.leader, part.leader_epoch) == ([3, 2], [2, 3], 3, 1)


def test_shrinking_the_replication_factor_completes_at_once() -> None:
    images = Images(3)
    images.partition(0, [1, 2, 3])
    reassign(images, [2, 3])
    part = images.part()
    assert (part.replicas, part.isr, part.leader, part.removing_replicas) == ([2, 3], [2, 3], 2, [])


def test_cancelling_reverts_to_the_replicas_before_the_reassignment() -> None:
    images = Images(5)
    images.partition(0, [1, 2, 3])
    reassign(images, [4, 5, 1])
    leader_sets_isr(images, [1, 2, 3, 4])
    assert reassign(images, None) is None
    assert state(images) == ([1, 2, 3], [1, 2, 3], 1, [], [])
    assert reassignment.list_partition_reassignments(images.image, [TP0]) == {}


def test_cancelling_when_only_new_replicas_are_in_sync_keeps_an_old_one_in_the_isr() -> None:
    images = Images(4)
    images.partition(0, [1, 2])
    reassign(images, [3, 4])
    leader_sets_isr(images, [1, 2, 3])
    images.write(elections.records_fence_broker(images.image, 1))
    images.write(elections.records_fence_broker(images.image, 2))
    assert state(images)[:3] == ([3, 4, 1, 2], [3], 3)
    reassign(images, None)
    assert state(images) == ([1, 2], [1], -1, [], [])


def test_a_new_target_during_a_reassignment_starts_from_the_widened_replicas() -> None:
    images = Images(5)
    images.partition(0, [1, 2])
    reassign(images, [3, 4])
    reassign(images, [5, 1])
    assert state(images) == ([5, 1, 3, 4, 2], [1, 2], 1, [5], [3, 4, 2])


@pytest.mark.parametrize(("target", "code"), [
    ([], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ([1, 1], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ([1, 9], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (None, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),
])
def test_bad_reassignments_get_kafkas_errors(target: list[int] | None, code: ErrorCode) -> None:
    images = Images(3)
    images.partition(0, [1, 2])
    error = reassign(images, target)
    assert error is not None and error.error_code == code
    assert state(images) == ([1, 2], [1, 2], 1, [], [])


def test_an_unknown_partition_is_reported_and_left_out_of_the_listing() -> None:
    images = Images(3)
    images.partition(0, [1, 2])
    missing = TopicPartition("nope", 0)
    error = reassign(images, [1], missing)
    assert error is not None and error.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert reassignment.list_partition_reassignments(images.image, [missing, TP0]) == {}


def test_a_fenced_target_replica_does_not_join_until_it_is_back() -> None:
    images = Images(4)
    images.partition(0, [1, 2])
    images.write(elections.records_fence_broker(images.image, 3))
    reassign(images, [3, 2])
    with pytest.raises(Rejected) as exc:
        leader_sets_isr(images, [1, 2, 3])
    assert exc.value.error_code == ErrorCode.INELIGIBLE_REPLICA
    assert state(images)[3:] == ([3], [1])
