"""The classic group protocol on a fake clock: joins, syncs, heartbeats, leaves, timeouts."""

from __future__ import annotations

import pytest

from brokercore.coordinator.state import ClassicGroupState, IllegalStateTransition
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .harness import REBALANCE_MS, SESSION_MS, Harness, settle, subscription


async def test_v4_join_first_hands_out_a_member_id_then_forms_generation_1() -> None:
    h = Harness()
    first = await h.join(require_known_member=True)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("c-")
    assert h.group().members == {}

    joined = await h.join(first.member_id, require_known_member=True)

    assert joined.error_code == ErrorCode.NONE
    assert (joined.generation_id, joined.leader_id) == (1, first.member_id)
    assert [m for m, _, _ in joined.members] == [first.member_id]
    assert h.group().state is ClassicGroupState.COMPLETING_REBALANCE
    sync = h.start_sync(joined, {first.member_id: b"assignment"})
    await settle()
    assert sync.result().assignment == b"assignment"
    assert h.group().state is ClassicGroupState.STABLE


async def test_a_new_member_rebalances_the_group_and_only_the_leader_gets_metadata() -> None:
    h = Harness()
    [a] = await h.stable_group(1)
    b_join = h.start_join(protocols=[("range", subscription("t", "u"))])
    await settle()
    assert h.group().state is ClassicGroupState.PREPARING_REBALANCE
    assert h.heartbeat(a) == ErrorCode.REBALANCE_IN_PROGRESS

    a2 = await h.join(a.member_id)
    b = b_join.result()

    assert a2.generation_id == b.generation_id == 2
    assert a2.leader_id == b.leader_id == a.member_id
    assert sorted(m for m, _, _ in a2.members) == sorted([a.member_id, b.member_id])
    assert dict((m, md) for m, _, md in a2.members)[b.member_id] == subscription("t", "u")
    assert b.members == []
    follower_sync = h.start_sync(b)
    await settle()
    assert not follower_sync.done()  # waits for the leader's assignment
    leader_sync = h.start_sync(a2, {a.member_id: b"A", b.member_id: b"B"})
    await settle()
    assert (leader_sync.result().assignment, follower_sync.result().assignment) == (b"A", b"B")
    assert h.group().state is ClassicGroupState.STABLE


async def test_a_member_that_stops_heartbeating_is_evicted_after_its_session() -> None:
    h = Harness()
    a, b = await h.stable_group(2)
    h.advance(SESSION_MS / 1000 - 1)
    assert h.heartbeat(a) == ErrorCode.NONE
    h.advance(2)

    assert b.member_id not in h.group().members
    assert h.group().state is ClassicGroupState.PREPARING_REBALANCE
    rejoined = await h.join(a.member_id)
    assert rejoined.generation_id == a.generation_id + 1
    assert [m for m, _, _ in rejoined.members] == [a.member_id]


async def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_dropped() -> None:
    h = Harness()
    a, b = await h.stable_group(2)
    c_join = h.start_join()
    a_join = h.start_join(a.member_id)
    await settle()
    for _ in range(REBALANCE_MS // (SESSION_MS // 2) - 1):
        h.advance(SESSION_MS / 2000)
        assert h.heartbeat(b) == ErrorCode.REBALANCE_IN_PROGRESS  # alive, but never rejoins
    h.advance(SESSION_MS / 2000)
    await settle()

    assert a_join.result().generation_id == c_join.result().generation_id == 2
    assert set(h.group().members) == {a.member_id, c_join.result().member_id}
    assert h.heartbeat(b) == ErrorCode.UNKNOWN_MEMBER_ID


async def test_session_timeouts_outside_the_broker_limits_are_refused() -> None:
    h = Harness()
    assert (await h.join(session_ms=999)).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert (await h.join(session_ms=1_800_001)).error_code == ErrorCode.INVALID_SESSION_TIMEOUT


async def test_old_generations_are_fenced() -> None:
    h = Harness()
    a, b = await h.stable_group(2)
    await h.coordinator.membership.sync("g", 1, a.member_id, None, (None, None), {})
    h.coordinator.membership.leave("g", [(b.member_id, None)])
    a2 = await h.join(a.member_id)
    assert a2.generation_id == 2

    assert h.heartbeat(a) == ErrorCode.ILLEGAL_GENERATION
    stale_sync = await h.start_sync(a)
    assert stale_sync.error_code == ErrorCode.ILLEGAL_GENERATION
    errors = await h.coordinator.offsets.commit("g", 1, a.member_id, None, {_tp(): (5, -1, None)})
    assert errors == {_tp(): ErrorCode.ILLEGAL_GENERATION}


async def test_a_member_without_a_common_protocol_is_refused() -> None:
    h = Harness()
    await h.stable_group(1)
    other = await h.join(protocols=[("roundrobin", b"")])
    assert other.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


async def test_the_protocol_most_members_prefer_among_common_ones_is_chosen() -> None:
    h = Harness()
    prefs = [["roundrobin", "range"], ["range", "roundrobin", "sticky"], ["range", "roundrobin"]]
    tasks = [h.start_join(protocols=[(p, b"") for p in pref]) for pref in prefs]
    await settle()
    h.advance(0.1)
    await settle()
    assert {t.result().protocol_name for t in tasks} == {"range"}


async def test_the_last_member_leaving_empties_the_group_and_stores_it() -> None:
    h = Harness()
    a, b = await h.stable_group(2)
    top, errors = h.coordinator.membership.leave("g", [(b.member_id, None), ("nobody", None)])
    assert (top, errors) == (ErrorCode.NONE, [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID])
    assert h.group().state is ClassicGroupState.PREPARING_REBALANCE

    h.coordinator.membership.leave("g", [(a.member_id, None)])

    assert h.group().state is ClassicGroupState.EMPTY
    assert h.group().generation_id == 2
    h.restart()
    assert h.coordinator.list_groups()[0].protocol_type == "consumer"


async def test_a_static_member_that_restarts_takes_its_place_without_a_rebalance() -> None:
    h = Harness()
    first = await h.join(instance_id="i-1")
    await h.start_sync(first, {first.member_id: b"mine"}, instance_id="i-1")

    again = await h.join(instance_id="i-1")

    assert again.error_code == ErrorCode.NONE
    assert again.member_id != first.member_id
    assert again.generation_id == first.generation_id
    assert h.group().state is ClassicGroupState.STABLE
    assert (await h.start_sync(again, instance_id="i-1")).assignment == b"mine"
    fenced = h.coordinator.membership.heartbeat("g", 1, first.member_id, "i-1")
    assert fenced == ErrorCode.FENCED_INSTANCE_ID


async def test_a_pending_member_that_never_comes_back_expires() -> None:
    h = Harness()
    pending = await h.join(require_known_member=True)
    h.advance(SESSION_MS / 1000 + 1)
    assert (await h.join(pending.member_id)).error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_the_initial_rebalance_delay_waits_for_more_joiners() -> None:
    h = Harness()
    a = h.start_join()
    await settle()
    assert not a.done()
    b = h.start_join()
    await settle()
    h.advance(0.1)
    await settle()
    assert a.result().generation_id == b.result().generation_id == 1
    assert len(h.group().members) == 2


async def test_a_group_on_a_partition_this_broker_does_not_lead_is_not_coordinated() -> None:
    h = Harness()
    h.store.led.clear()
    assert (await h.join()).error_code == ErrorCode.NOT_COORDINATOR


def test_illegal_transitions_are_bugs() -> None:
    h = Harness()
    group = h.coordinator.groups.create_classic("g")
    with pytest.raises(IllegalStateTransition):
        group.transition_to(ClassicGroupState.STABLE, 0)


def _tp() -> TopicPartition:
    return TopicPartition("t", 0)
