"""Consumer groups and their committed offsets as typed values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ClusterRequestError
from .metadata import Broker, TopicPartition


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    is_simple: bool
    state: str  # STABLE, EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, DEAD, UNKNOWN


@dataclass(frozen=True)
class GroupMember:
    member_id: str  # Confluent's consumer_id
    group_instance_id: str | None  # static membership's instance id
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ConsumerGroup:
    group_id: str
    is_simple: bool
    state: str
    partition_assignor: str
    coordinator: Broker | None
    members: tuple[GroupMember, ...]

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


def state_name(state: Any) -> str:
    return str(getattr(state, "name", state or "UNKNOWN")).upper()


def listing_from_confluent(g: Any) -> GroupListing:
    return GroupListing(g.group_id, bool(g.is_simple_consumer_group), state_name(g.state))


def group_from_confluent(d: Any) -> ConsumerGroup:
    members = tuple(
        GroupMember(
            m.member_id, m.group_instance_id, m.client_id, m.host,
            tuple(sorted(TopicPartition(tp.topic, tp.partition)
                         for tp in (m.assignment.topic_partitions if m.assignment else []))),
        )
        for m in d.members
    )
    c = d.coordinator
    coordinator = Broker(c.id, c.host, c.port) if c is not None and c.id >= 0 else None
    return ConsumerGroup(d.group_id, bool(d.is_simple_consumer_group), state_name(d.state),
                         d.partition_assignor or "", coordinator, members)
