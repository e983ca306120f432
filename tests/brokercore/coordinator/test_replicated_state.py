"""Group state is answered only once the ISR has it, and follows partition leadership."""

from __future__ import annotations

import asyncio

from brokercore.coordinator.coordinator import GroupCoordinator
from brokercore.coordinator.state import ClassicGroupState, OffsetAndMetadata
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .harness import INITIAL_DELAY_MS, Harness, settle

T0 = TopicPartition("t", 0)
OK = ErrorCode.NONE


def committed(h: Harness, group_id: str = "g") -> int | None:
    om = h.coordinator.offsets.fetch(group_id, [T0])[T0]
    return None if om is None else om.offset


def held() -> Harness:
    h = Harness()
    h.store.replicate_on_append = False
    return h


async def test_a_commit_answers_only_after_the_isr_has_it() -> None:
    h = held()
    commit = asyncio.ensure_future(
        h.coordinator.offsets.commit("g", -1, "", None, {T0: (42, -1, None)}))
    await settle()
    assert not commit.done()
    assert committed(h) is None  # not visible before it is replicated
    await h.store.replicate()
    await settle()
    assert commit.result() == {T0: OK}
    assert committed(h) == 42


async def test_a_commit_that_cannot_be_replicated_is_refused_and_not_applied() -> None:
    h = held()
    commit = asyncio.ensure_future(
        h.coordinator.offsets.commit("g", -1, "", None, {T0: (42, -1, None)}))
    await settle()
    await h.store.fail_replication(ErrorCode.NOT_ENOUGH_REPLICAS)
    await settle()
    # Kafka's mapping: a retriable coordinator error, never the produce error itself.
    assert commit.result() == {T0: ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert committed(h) is None


async def test_a_commit_whose_leadership_moved_while_replicating_is_not_coordinator() -> None:
    h = held()
    commit = asyncio.ensure_future(
        h.coordinator.offsets.commit("g", -1, "", None, {T0: (42, -1, None)}))
    await settle()
    await h.store.fail_replication(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    await settle()
    assert commit.result() == {T0: ErrorCode.NOT_COORDINATOR}


async def test_an_older_commit_replicated_last_does_not_overwrite_a_newer_one() -> None:
    h = Harness()
    await h.coordinator.offsets.commit("g", -1, "", None, {T0: (1, -1, None)})
    group = h.group()
    newer, older = OffsetAndMetadata(9, -1, "", 0), OffsetAndMetadata(5, -1, "", 0)
    h.coordinator.offsets._apply(group, {T0: newer}, written_at=100)
    h.coordinator.offsets._apply(group, {T0: older}, written_at=50)
    assert committed(h) == 9


async def test_members_receive_the_assignment_only_once_it_is_replicated() -> None:
    h = held()
    tasks = [h.start_join() for _ in range(2)]
    await settle()
    h.advance(INITIAL_DELAY_MS / 1000)
    await settle()
    a, b = (t.result() for t in tasks)
    leader = a if a.members else b
    syncs = [h.start_sync(r, {m: m.encode() for m, _, _ in leader.members}
                          if r is leader else None) for r in (a, b)]
    await settle()
    assert not any(s.done() for s in syncs)
    assert h.group().state is ClassicGroupState.COMPLETING_REBALANCE
    await h.store.replicate()
    await settle()
    assert [s.result().assignment for s in syncs] == [a.member_id.encode(),
                                                      b.member_id.encode()]
    assert h.group().state is ClassicGroupState.STABLE


async def test_an_assignment_that_cannot_be_replicated_sends_the_group_back_to_rebalance(
) -> None:
    h = held()
    [join] = [h.start_join()]
    await settle()
    h.advance(INITIAL_DELAY_MS / 1000)
    await settle()
    a = join.result()
    sync = h.start_sync(a, {a.member_id: b"mine"})
    await settle()
    await h.store.fail_replication(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    await settle()
    assert sync.result().error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.group().state is ClassicGroupState.PREPARING_REBALANCE


async def test_a_coordinator_that_regains_leadership_reloads_what_another_one_wrote() -> None:
    h = Harness()
    await h.coordinator.offsets.commit("g", -1, "", None, {T0: (1, -1, None)})
    partition = h.coordinator.partition_of("g")
    # Another broker leads in epoch 1 (sharing the replicated log) and commits 2 ...
    h.store.epochs[partition] = 1
    other = GroupCoordinator(h.store, h.clock, h.config)
    assert await other.offsets.commit("g", -1, "", None, {T0: (2, -1, None)}) == {T0: OK}
    # ... and leadership comes back in epoch 2 before this broker's next tick.
    h.store.epochs[partition] = 2
    assert committed(h) == 2


async def test_a_coordinator_that_loses_leadership_answers_not_coordinator() -> None:
    h = Harness()
    await h.coordinator.offsets.commit("g", -1, "", None, {T0: (1, -1, None)})
    h.store.led.discard(h.coordinator.partition_of("g"))
    errors = await h.coordinator.offsets.commit("g", -1, "", None, {T0: (2, -1, None)})
    assert errors == {T0: ErrorCode.NOT_COORDINATOR}
    assert "g" not in h.coordinator.groups.classic
