"""Group states and types as clusterclient names them, from confluent-kafka's values."""

from __future__ import annotations

from confluent_kafka import ConsumerGroupState, ConsumerGroupType, Node
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import ConsumerGroupDescription, MemberAssignment, MemberDescription

from clusterclient import GroupState, GroupType, TopicPartition
from clusterclient.groups import group_from_confluent, group_state, group_type


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


def assignment(*partitions: int) -> MemberAssignment:
    return MemberAssignment([KafkaTopicPartition("orders", p) for p in partitions])


def test_a_consumer_group_member_short_of_its_target_is_reconciling() -> None:
    # What confluent-kafka builds from a ConsumerGroupDescribe answer mid-rebalance: the
    # state it cannot name (UNKNOWN), one member still owning a partition it must give up.
    description = ConsumerGroupDescription(
        "g", False, [
            MemberDescription("a", "c", "/h", assignment(0, 1), target_assignment=assignment(0)),
            MemberDescription("b", "c", "/h", assignment(), target_assignment=assignment()),
        ], "uniform", ConsumerGroupState.UNKNOWN, Node(1, "127.0.0.1", 9092),
        type=ConsumerGroupType.CONSUMER)
    group = group_from_confluent(description)
    assert (group.type, group.state) == (GroupType.CONSUMER, GroupState.UNKNOWN)
    first, second = group.members
    assert first.reconciling and first.target_assignment == (TopicPartition("orders", 0),)
    assert not second.reconciling
