"""A coordinator loading a long `__consumer_offsets` partition answers
COORDINATOR_LOAD_IN_PROGRESS until the whole partition is replayed, never half of it."""

from __future__ import annotations

import pytest

from brokercore.coordinator.state import GroupError
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .harness import Harness, settle

TPS = [TopicPartition("t", p) for p in range(20)]
ROUNDS = 10


async def _commit_rounds(h: Harness) -> None:
    for n in range(ROUNDS):
        assert set((await h.coordinator.offsets.commit(
            "g", -1, "", None, {tp: (n * 100 + tp.partition, -1, None) for tp in TPS})).values()
        ) == {ErrorCode.NONE}


def _load_error(call: object) -> ErrorCode:
    assert callable(call)
    with pytest.raises(GroupError) as excinfo:
        call()
    return excinfo.value.error_code


async def test_group_requests_answer_load_in_progress_until_the_partition_is_loaded() -> None:
    h = Harness()
    await _commit_rounds(h)
    h.restart()
    h.coordinator.load_slice_records = 7  # 200 records: many slices
    loading = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert _load_error(lambda: h.coordinator.offsets.fetch("g", None)) == loading
    assert _load_error(lambda: h.coordinator.describe_group("g")) == loading
    join = await h.join()
    assert join.error_code == loading
    commit = await h.coordinator.offsets.commit("g", -1, "", None, {TPS[0]: (1, -1, None)})
    assert commit == {TPS[0]: loading}
    assert "g" not in h.coordinator.groups.classic  # nothing half-loaded is ever visible

    await h.coordinator.wait_loaded()
    fetched = h.coordinator.offsets.fetch("g", None)
    assert {tp: om.offset for tp, om in fetched.items() if om} == {
        tp: (ROUNDS - 1) * 100 + tp.partition for tp in TPS}


async def test_a_leadership_change_mid_load_starts_the_load_again_in_the_new_epoch() -> None:
    h = Harness()
    await _commit_rounds(h)
    h.restart()
    h.coordinator.load_slice_records = 7
    partition = h.coordinator.partition_of("g")
    assert _load_error(lambda: h.coordinator.offsets.fetch("g", None)) == (
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    h.store.led.discard(partition)
    assert _load_error(lambda: h.coordinator.offsets.fetch("g", None)) == (
        ErrorCode.NOT_COORDINATOR)
    await settle()
    assert "g" not in h.coordinator.groups.classic  # the cancelled load installed nothing
    h.store.led.add(partition)
    h.store.epochs[partition] = 1
    h.coordinator.refresh_partitions()
    await h.coordinator.wait_loaded()
    assert h.coordinator.partitions.epochs[partition] == 1
    assert len(h.coordinator.offsets.fetch("g", None)) == len(TPS)


async def test_list_groups_answers_load_in_progress_while_any_partition_loads() -> None:
    h = Harness()
    await _commit_rounds(h)
    other = next(f"o{n}" for n in range(100)
                 if h.coordinator.partition_of(f"o{n}") != h.coordinator.partition_of("g"))
    await h.coordinator.offsets.commit(other, -1, "", None, {TPS[0]: (5, -1, None)})
    h.restart()
    h.coordinator.load_slice_records = 7  # "g"'s partition loads for long, `other`'s at once
    assert _load_error(h.coordinator.list_groups) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert other in h.coordinator.groups.classic  # loaded, but not listed while "g" is missing

    await h.coordinator.wait_loaded()
    assert sorted(g.group_id for g in h.coordinator.list_groups()) == ["g", other]
