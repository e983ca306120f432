"""Transactional offset commits (TxnOffsetCommit): held until their producer's marker, then
applied (commit) or dropped (abort), the same after a replay."""

from __future__ import annotations

from brokercore.coordinator.offsets import Commit
from brokercore.coordinator.records import TxnMarker
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .harness import Harness

T0 = TopicPartition("t", 0)
OK = ErrorCode.NONE
PRODUCER = (7, 3)


def committed(h: Harness, group: str = "g") -> int | None:
    found = h.coordinator.offsets.fetch(group, [T0])[T0]
    return None if found is None else found.offset


def marker(h: Harness, commit: bool, producer: tuple[int, int] = PRODUCER) -> TxnMarker:
    """The marker a partition leader writes, written to the group's partition."""
    partition = h.coordinator.partition_of("g")
    end = h.store.append_marker(partition, producer, commit)
    return TxnMarker(*producer, commit, end - 1)


async def test_offsets_count_only_once_the_transaction_commits() -> None:
    h = Harness()
    offsets = h.coordinator.offsets
    assert await offsets.txn_commit("g", PRODUCER, -1, "", None, {T0: (5, -1, None)}) == {
        T0: OK}
    assert committed(h) is None
    offsets.complete_txn(h.coordinator.partition_of("g"), marker(h, commit=True))
    assert committed(h) == 5


async def test_an_abort_drops_them() -> None:
    h = Harness()
    offsets = h.coordinator.offsets
    await offsets.commit("g", -1, "", None, {T0: (2, -1, None)})
    await offsets.txn_commit("g", PRODUCER, -1, "", None, {T0: (5, -1, None)})
    offsets.complete_txn(h.coordinator.partition_of("g"), marker(h, commit=False))
    assert committed(h) == 2


async def test_a_replay_applies_committed_transactions_and_keeps_open_ones_pending() -> None:
    h = Harness()
    offsets = h.coordinator.offsets
    await offsets.txn_commit("g", PRODUCER, -1, "", None, {T0: (5, -1, None)})
    marker(h, commit=True)
    await offsets.txn_commit("g", PRODUCER, -1, "", None, {T0: (9, -1, None)})
    h.restart()
    assert committed(h) == 5
    h.coordinator.offsets.complete_txn(h.coordinator.partition_of("g"), marker(h, commit=True))
    assert committed(h) == 9


async def test_offsets_of_a_fenced_epoch_never_count() -> None:
    h = Harness()
    offsets = h.coordinator.offsets
    await offsets.txn_commit("g", (7, 3), -1, "", None, {T0: (5, -1, None)})  # the zombie
    # Its successor (epoch 4) commits a transaction of its own without offsets.
    offsets.complete_txn(h.coordinator.partition_of("g"), marker(h, True, (7, 4)))
    assert committed(h) is None
    h.restart()
    assert committed(h) is None


async def test_partitions_with_pending_offsets_are_unstable_until_the_marker() -> None:
    h = Harness()
    offsets = h.coordinator.offsets
    await offsets.txn_commit("g", PRODUCER, -1, "", None, {T0: (5, -1, None)})
    assert offsets.unstable("g") == {T0}
    assert offsets.unstable("other") == set()
    offsets.complete_txn(h.coordinator.partition_of("g"), marker(h, commit=True))
    assert offsets.unstable("g") == set()


async def test_a_transaction_may_commit_for_a_group_with_members_checking_only_what_it_names(
) -> None:
    h = Harness()
    [member] = await h.stable_group(1)
    offsets = h.coordinator.offsets
    commit: dict[TopicPartition, Commit] = {T0: (5, -1, None)}
    assert await offsets.txn_commit("g", PRODUCER, -1, "", None, commit) == {T0: OK}
    assert await offsets.txn_commit("g", PRODUCER, member.generation_id, member.member_id,
                                    None, commit) == {T0: OK}
    assert await offsets.txn_commit("g", PRODUCER, member.generation_id + 1,
                                    member.member_id, None, commit) == {
        T0: ErrorCode.ILLEGAL_GENERATION}
    assert await offsets.txn_commit("g", PRODUCER, -1, "stranger", None, commit) == {
        T0: ErrorCode.UNKNOWN_MEMBER_ID}
