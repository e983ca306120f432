"""Group states and types as clusterclient names them, from confluent-kafka's values."""

from __future__ import annotations

from confluent_kafka import ConsumerGroupState, ConsumerGroupType

from clusterclient import GroupState, GroupType
from clusterclient.groups import group_state, group_type


def test_confluent_states_take_kafkas_names() -> None:
    assert group_state(ConsumerGroupState.PREPARING_REBALANCING) is (
        GroupState.PREPARING_REBALANCE)
    assert group_state(ConsumerGroupState.COMPLETING_REBALANCING) is (
        GroupState.COMPLETING_REBALANCE)
    assert group_state(ConsumerGroupState.STABLE) is GroupState.STABLE
    assert group_state(None) is GroupState.UNKNOWN


def test_consumer_group_states_are_named_once_a_client_names_them() -> None:
    # confluent-kafka 2.16 has no member for these; a later enum that does maps by name.
    assert group_state("Assigning") is GroupState.ASSIGNING
    assert group_state("RECONCILING") is GroupState.RECONCILING
    assert group_state("NotReady") is GroupState.UNKNOWN


def test_only_empty_and_dead_groups_are_inactive() -> None:
    assert [s.name for s in GroupState if not s.active] == ["EMPTY", "DEAD"]


def test_group_types_are_kafkas() -> None:
    assert group_type(ConsumerGroupType.CONSUMER) is GroupType.CONSUMER
    assert group_type(ConsumerGroupType.CLASSIC) is GroupType.CLASSIC
    assert group_type(ConsumerGroupType.UNKNOWN) is GroupType.UNKNOWN
    assert group_type(None) is GroupType.UNKNOWN
