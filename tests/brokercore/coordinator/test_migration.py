"""Online migration between the classic and the consumer protocol, on a fake clock."""

from __future__ import annotations

import uuid

from brokercore.config import BrokerConfig, ConfigError
from brokercore.coordinator.config import CoordinatorConfig
from brokercore.coordinator.consumer_group import ConsumerGroup
from brokercore.coordinator.consumer_protocol import HeartbeatRequest
from brokercore.coordinator.coordinator import GroupCoordinator
from brokercore.coordinator.embedded_protocol import decode_assignment, encode_assignment
from brokercore.coordinator.state import ClassicGroupState, Group
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .harness import Harness

T = str(uuid.UUID(int=7))
OK = ErrorCode.NONE


def _harness(upgrade: bool = True, downgrade: bool = True) -> Harness:
    h = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=100,
                                         min_session_timeout_ms=1000,
                                         upgrade_enabled=upgrade, downgrade_enabled=downgrade))
    h.coordinator = GroupCoordinator(h.store, h.clock, h.config, topics=lambda: {"t": (T, 4)})
    return h


def _restart(h: Harness) -> None:
    """A new coordinator replaying the same `__consumer_offsets` (a failover)."""
    h.coordinator = GroupCoordinator(h.store, h.clock, h.config, topics=lambda: {"t": (T, 4)})
    h.coordinator.refresh_partitions()


async def _classic_owner_of_everything(h: Harness) -> str:
    [joined] = await h.stable_group(1)
    group = h.group()
    group.members[joined.member_id].assignment = encode_assignment({"t": frozenset(range(4))})
    return joined.member_id


def _modern_joins(h: Harness) -> HeartbeatRequest:
    return HeartbeatRequest("g", "modern", 0, rebalance_timeout_ms=30_000,
                            subscribed_topic_names=("t",))


async def test_an_upgrade_keeps_the_classic_members_assignment_and_survives_a_failover() -> None:
    h = _harness()
    classic_id = await _classic_owner_of_everything(h)
    result = await h.coordinator.consumer.heartbeat(_modern_joins(h))
    assert result.error_code == OK
    group = h.coordinator.groups.consumer["g"]
    classic = group.members[classic_id]
    assert classic.classic is not None and classic.assigned == {T: frozenset(range(4))}
    # The new member waits for the partitions the classic member still holds, and the
    # classic member is told to rejoin.
    assert result.assignment == {}
    assert h.coordinator.membership.heartbeat("g", 1, classic_id, None) == \
        ErrorCode.REBALANCE_IN_PROGRESS

    _restart(h)
    replayed = h.coordinator.groups.consumer["g"]
    assert replayed.members[classic_id].classic == classic.classic
    assert replayed.members[classic_id].assigned == classic.assigned
    assert replayed.group_epoch == group.group_epoch


async def test_a_classic_member_rejoins_into_the_consumer_group_and_syncs_its_share() -> None:
    h = _harness()
    classic_id = await _classic_owner_of_everything(h)
    await h.coordinator.consumer.heartbeat(_modern_joins(h))
    rejoined = await h.join(classic_id)  # eager: it owns nothing while it rejoins
    assert rejoined.error_code == OK and rejoined.leader_id == ""
    synced = await h.start_sync(rejoined)
    assert synced.error_code == OK
    kept = decode_assignment(synced.assignment)["t"]
    assert 0 < len(kept) < 4
    # It owes nothing more once it rejoins owning only what it kept.
    again = await h.join(classic_id)
    assert h.coordinator.membership.heartbeat("g", again.generation_id, classic_id, None) == OK


async def test_a_downgrade_follows_the_last_consumer_member_out_and_rebalances() -> None:
    h = _harness()
    classic_id = await _classic_owner_of_everything(h)
    joined = await h.coordinator.consumer.heartbeat(_modern_joins(h))
    await h.coordinator.consumer.heartbeat(
        HeartbeatRequest("g", "modern", -1))
    group = h.coordinator.groups.classic["g"]
    assert isinstance(group, Group) and group.state is ClassicGroupState.PREPARING_REBALANCE
    assert joined.member_epoch <= group.generation_id
    assert decode_assignment(group.members[classic_id].assignment) == {"t": frozenset(range(4))}
    assert h.coordinator.membership.heartbeat("g", 1, classic_id, None) == \
        ErrorCode.REBALANCE_IN_PROGRESS
    _restart(h)
    assert "g" in h.coordinator.groups.classic and "g" not in h.coordinator.groups.consumer


async def test_the_policy_decides_which_conversions_happen() -> None:
    upgrade_only = _harness(downgrade=False)
    await _classic_owner_of_everything(upgrade_only)
    await upgrade_only.coordinator.consumer.heartbeat(_modern_joins(upgrade_only))
    await upgrade_only.coordinator.consumer.heartbeat(HeartbeatRequest("g", "modern", -1))
    assert isinstance(upgrade_only.coordinator.groups.get("g"), ConsumerGroup)

    downgrade_only = _harness(upgrade=False)
    await _classic_owner_of_everything(downgrade_only)
    refused = await downgrade_only.coordinator.consumer.heartbeat(_modern_joins(downgrade_only))
    assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_an_unknown_policy_stops_the_broker_at_startup() -> None:
    config = BrokerConfig({"group.consumer.migration.policy": "sideways"})
    try:
        CoordinatorConfig.from_broker(config)
    except ConfigError as exc:
        assert "migration.policy" in str(exc)
    else:
        raise AssertionError("accepted an unknown policy")
    upper = CoordinatorConfig.from_broker(
        BrokerConfig({"group.consumer.migration.policy": "DOWNGRADE"}))
    assert (upper.upgrade_enabled, upper.downgrade_enabled) == (False, True)



async def test_a_classic_member_that_never_rejoins_is_removed_after_its_rebalance_timeout(
) -> None:
    h = _harness()
    classic_id = await _classic_owner_of_everything(h)
    await h.coordinator.consumer.heartbeat(_modern_joins(h))
    group = h.coordinator.groups.consumer["g"]
    for _ in range(6):  # it keeps heartbeating, so its session never ends
        assert classic_id in group.members
        assert h.coordinator.membership.heartbeat("g", 1, classic_id, None) == \
            ErrorCode.REBALANCE_IN_PROGRESS
        h.advance(5)  # the last one reaches its rebalance timeout (30 s) since it was told
    assert classic_id not in group.members
    # Its partitions are free: the consumer-protocol member gets them all.
    result = await h.coordinator.consumer.heartbeat(
        HeartbeatRequest("g", "modern", group.members["modern"].member_epoch, owned={}))
    assert result.assignment == {T: frozenset(range(4))}


async def test_after_a_downgrade_a_member_still_commits_at_its_epoch_until_it_rejoins() -> None:
    h = _harness()
    classic_id = await _classic_owner_of_everything(h)
    await h.coordinator.consumer.heartbeat(_modern_joins(h))
    await h.join(classic_id)  # revokes what the new member gets
    caught_up = await h.join(classic_id)
    epoch = h.coordinator.groups.consumer["g"].group_epoch
    assert caught_up.generation_id == epoch
    await h.coordinator.consumer.heartbeat(HeartbeatRequest("g", "modern", -1))
    assert h.group().generation_id == epoch
    tp = TopicPartition("t", 0)
    assert await h.coordinator.offsets.commit("g", epoch, classic_id, None,
                                              {tp: (3, -1, None)}) == {tp: OK}


async def test_a_classic_member_that_joined_and_never_syncs_is_removed_in_time() -> None:
    h = _harness()
    classic_id = await _classic_owner_of_everything(h)
    await h.coordinator.consumer.heartbeat(_modern_joins(h))
    await h.join(classic_id)  # revokes what the new member gets
    joined = await h.join(classic_id)  # caught up: nothing more to rejoin for
    group = h.coordinator.groups.consumer["g"]
    for _ in range(6):  # heartbeats keep its session, not its sync
        assert classic_id in group.members
        assert h.coordinator.membership.heartbeat(
            "g", joined.generation_id, classic_id, None) == OK
        h.advance(5)  # the last one reaches its rebalance timeout (30 s) since it joined
    assert classic_id not in group.members
