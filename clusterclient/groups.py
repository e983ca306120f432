"""Consumer groups and their committed offsets as typed values.

Both group protocols: the classic one (JoinGroup/SyncGroup) and KIP-848's consumer protocol
(`group.protocol=consumer`, Kafka 4.0). `GroupType` says which one a group speaks;
`GroupState` holds the states of both, under the names Kafka's admin client gives them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .errors import ClusterRequestError
from .metadata import Broker, TopicPartition


class GroupType(StrEnum):
    """Kafka's GroupType as `kafka-consumer-groups --list --type` prints it."""

    CLASSIC = "classic"
    CONSUMER = "consumer"  # KIP-848
    UNKNOWN = "unknown"  # the client could not tell (a broker without ListGroups v5)


class GroupState(StrEnum):
    """Kafka's GroupState (the admin client's), by name. A classic group is Empty,
    PreparingRebalance, CompletingRebalance, Stable or Dead; a consumer group is Empty,
    Assigning, Reconciling, Stable or Dead. UNKNOWN is what the client reports for a state
    it cannot name: confluent-kafka 2.16 names neither ASSIGNING nor RECONCILING (README)."""

    EMPTY = "EMPTY"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    ASSIGNING = "ASSIGNING"
    RECONCILING = "RECONCILING"
    STABLE = "STABLE"
    DEAD = "DEAD"
    UNKNOWN = "UNKNOWN"

    @property
    def active(self) -> bool:
        """True while the group may have members; Kafka resets offsets only otherwise."""
        return self not in (GroupState.EMPTY, GroupState.DEAD)


# librdkafka's enum names two states its own way (PREPARING_REBALANCING); Kafka's names win.
_CONFLUENT_STATE = {"PREPARING_REBALANCING": "PREPARING_REBALANCE",
                    "COMPLETING_REBALANCING": "COMPLETING_REBALANCE"}


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    is_simple: bool
    state: GroupState
    type: GroupType


@dataclass(frozen=True)
class GroupMember:
    member_id: str  # Confluent's consumer_id
    group_instance_id: str | None  # static membership's instance id
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    # A consumer group's member: the partitions the coordinator wants it to own
    # (ConsumerGroupDescribe's target assignment). None in a classic group.
    target_assignment: tuple[TopicPartition, ...] | None = None

    @property
    def reconciling(self) -> bool:
        """A consumer group's member that does not own its target yet."""
        return self.target_assignment is not None and self.target_assignment != self.assignment


@dataclass(frozen=True)
class ConsumerGroup:
    group_id: str
    is_simple: bool
    state: GroupState
    partition_assignor: str  # a consumer group's server-side assignor (uniform, range)
    coordinator: Broker | None
    members: tuple[GroupMember, ...]
    type: GroupType = GroupType.CLASSIC

    def owner(self, tp: TopicPartition) -> GroupMember | None:
        """The member that has `tp` assigned, if any."""
        return next((m for m in self.members if tp in m.assignment), None)


@dataclass(frozen=True)
class GroupOffsets:
    """A group's committed offsets (partitions without a commit are left out), or the
    error the coordinator answered for this group alone."""

    group_id: str
    offsets: dict[TopicPartition, int]
    error: ClusterRequestError | None = None


def group_state(state: Any) -> GroupState:
    """confluent-kafka's ConsumerGroupState (or a state's name) as a GroupState."""
    name = str(getattr(state, "name", state or "UNKNOWN")).upper()
    name = _CONFLUENT_STATE.get(name, name)
    return GroupState.__members__.get(name, GroupState.UNKNOWN)


def group_type(kind: Any) -> GroupType:
    name = str(getattr(kind, "name", kind or "UNKNOWN")).lower()
    return next((t for t in GroupType if t.value == name), GroupType.UNKNOWN)


def listing_from_confluent(g: Any) -> GroupListing:
    return GroupListing(g.group_id, bool(g.is_simple_consumer_group), group_state(g.state),
                        group_type(getattr(g, "type", None)))


def _partitions(assignment: Any) -> tuple[TopicPartition, ...]:
    return tuple(sorted(TopicPartition(tp.topic, tp.partition)
                        for tp in (assignment.topic_partitions if assignment else [])))


def group_from_confluent(d: Any) -> ConsumerGroup:
    kind = group_type(getattr(d, "type", None))
    members = tuple(
        GroupMember(
            m.member_id, m.group_instance_id, m.client_id, m.host, _partitions(m.assignment),
            _partitions(m.target_assignment) if kind is GroupType.CONSUMER else None,
        )
        for m in d.members
    )
    c = d.coordinator
    coordinator = Broker(c.id, c.host, c.port) if c is not None and c.id >= 0 else None
    return ConsumerGroup(d.group_id, bool(d.is_simple_consumer_group), group_state(d.state),
                         d.partition_assignor or "", coordinator, members, kind)
