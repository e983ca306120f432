"""Committed offsets: who may commit, what survives a restart, deletion and expiry."""

from __future__ import annotations

from brokercore.coordinator.state import ClassicGroupState
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .harness import Harness, subscription

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
OK = ErrorCode.NONE


async def test_a_simple_commit_creates_an_empty_group_that_only_stores_offsets() -> None:
    h = Harness()
    offsets = h.coordinator.offsets
    assert await offsets.commit("simple", -1, "", None, {T0: (42, 3, "meta")}) == {T0: OK}

    group = h.group("simple")
    assert (group.state, group.protocol_type) == (ClassicGroupState.EMPTY, None)
    fetched = offsets.fetch("simple", [T0, T1])
    assert fetched[T1] is None
    om = fetched[T0]
    assert om is not None
    assert (om.offset, om.leader_epoch, om.metadata) == (42, 3, "meta")


async def test_a_commit_with_a_generation_into_an_unknown_group_is_refused() -> None:
    h = Harness()
    errors = await h.coordinator.offsets.commit("g", 3, "someone", None, {T0: (1, -1, None)})
    assert errors == {T0: ErrorCode.ILLEGAL_GENERATION}


async def test_only_current_members_commit_into_a_group_with_members() -> None:
    h = Harness()
    [a] = await h.stable_group(1)
    offsets = h.coordinator.offsets

    assert await offsets.commit("g", -1, "", None, {T0: (1, -1, None)}) == {
        T0: ErrorCode.UNKNOWN_MEMBER_ID}
    assert await offsets.commit("g", 1, "stranger", None, {T0: (1, -1, None)}) == {
        T0: ErrorCode.UNKNOWN_MEMBER_ID}
    assert await offsets.commit("g", 1, a.member_id, None, {T0: (7, -1, None)}) == {T0: OK}


async def test_commits_during_completing_rebalance_are_told_to_wait() -> None:
    h = Harness()
    [a] = await h.stable_group(1)
    await h.join(a.member_id)  # the leader rejoins: generation 2, awaiting its sync
    errors = await h.coordinator.offsets.commit("g", 2, a.member_id, None, {T0: (1, -1, None)})
    assert errors == {T0: ErrorCode.REBALANCE_IN_PROGRESS}


async def test_oversized_metadata_is_refused_per_partition() -> None:
    h = Harness()
    errors = await h.coordinator.offsets.commit("g", -1, "", None,
                                          {T0: (1, -1, "x" * 4097), T1: (2, -1, "")})
    assert errors == {T0: ErrorCode.OFFSET_METADATA_TOO_LARGE, T1: OK}


async def test_offsets_and_groups_survive_a_restart_by_replaying_the_offsets_topic() -> None:
    h = Harness()
    a, b = await h.stable_group(2)
    await h.coordinator.offsets.commit("g", 1, a.member_id, None,
                                       {T0: (10, 2, "m"), T1: (5, 2, None)})
    await h.coordinator.offsets.commit("g", 1, b.member_id, None, {T0: (11, 2, "m2")})

    h.restart()

    fetched = h.coordinator.offsets.fetch("g", None)
    assert {tp: (om.offset, om.metadata) for tp, om in fetched.items() if om} == {
        T0: (11, "m2"), T1: (5, "")}
    group = h.group()
    assert (group.state, group.generation_id, group.protocol_type) == (
        ClassicGroupState.STABLE, 1, "consumer")
    assert h.heartbeat(a) == OK
    assert group.members[b.member_id].assignment == b.member_id.encode()


async def test_deleting_a_group_needs_it_empty_and_removes_its_offsets_for_good() -> None:
    h = Harness()
    [a] = await h.stable_group(1)
    await h.coordinator.offsets.commit("g", 1, a.member_id, None, {T0: (10, -1, None)})
    assert await h.coordinator.offsets.delete_group("g") == ErrorCode.NON_EMPTY_GROUP
    assert await h.coordinator.offsets.delete_group("nope") == ErrorCode.GROUP_ID_NOT_FOUND

    h.coordinator.membership.leave("g", [(a.member_id, None)])
    assert await h.coordinator.offsets.delete_group("g") == OK

    assert "g" not in h.coordinator.groups.classic
    h.restart()
    assert h.coordinator.offsets.fetch("g", [T0]) == {T0: None}
    assert h.coordinator.list_groups() == []


async def test_offset_delete_refuses_topics_the_group_still_subscribes_to() -> None:
    h = Harness()
    [a] = await h.stable_group(1)  # subscribed to "t"
    await h.coordinator.offsets.commit("g", 1, a.member_id, None,
                                       {T0: (1, -1, None), U0: (2, -1, None)})

    errors = await h.coordinator.offsets.delete_offsets("g", [T0, U0])

    assert errors == {T0: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, U0: OK}
    assert set(h.coordinator.offsets.fetch("g", None)) == {T0}
    h.restart()
    assert set(h.coordinator.offsets.fetch("g", None)) == {T0}


async def test_offsets_of_empty_groups_expire_after_the_retention() -> None:
    h = Harness()
    await h.coordinator.offsets.commit("old", -1, "", None, {T0: (1, -1, None)})
    h.clock.advance(3600)
    await h.coordinator.offsets.commit("new", -1, "", None, {T0: (1, -1, None)})
    retention_s = h.config.offsets_retention_ms / 1000

    h.advance(retention_s - 3600 + 1)

    assert "old" not in h.coordinator.groups.classic
    assert h.coordinator.offsets.fetch("new", [T0])[T0] is not None
    h.restart()
    assert [g.group_id for g in h.coordinator.list_groups()] == ["new"]


async def test_list_groups_filters_by_state_case_insensitively() -> None:
    h = Harness()
    await h.coordinator.offsets.commit("simple", -1, "", None, {T0: (1, -1, None)})
    assert [g.group_id for g in h.coordinator.list_groups({"empty"})] == ["simple"]
    assert h.coordinator.list_groups({"Stable"}) == []


def test_subscription_parsing_reads_consumer_protocol_topics() -> None:
    from brokercore.coordinator.records import subscription_topics

    assert subscription_topics(subscription("a", "b")) == {"a", "b"}
