"""KIP-848 consumer groups (`group.protocol=consumer`): their members and epochs, as data.

A consumer group has a **group epoch**, bumped whenever what the assignment depends on
changes (a member joins, leaves or changes its subscription; a subscribed topic appears or
gains partitions), and an **assignment epoch**, the group epoch its target assignment was
computed for. Each member has a **member epoch**: the assignment epoch it has caught up to.
A member moves towards its target one step at a time (`reconciliation.py`), revoking
before it is given partitions another member still owns.

The group's state is derived, as in Kafka's ConsumerGroup: Empty without members,
Assigning while the target lags the group epoch, Reconciling while some member lags the
target, Stable otherwise.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass, field

from brokercore.topic_partition import TopicPartition

from .state import OffsetAndMetadata

# topic id -> partitions: an assignment, as the protocol and the records carry it.
Assignment = dict[str, frozenset[int]]

# The member epochs of the protocol (ConsumerGroupHeartbeat's MemberEpoch).
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


# Regex subscriptions never match internal topics, as in Kafka.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@functools.lru_cache(maxsize=256)
def compile_subscription(regex: str) -> re.Pattern[str]:
    """The compiled pattern; re.error if it is not a valid regular expression."""
    return re.compile(regex)


def matching_topics(regex: str, topic_names: set[str]) -> set[str]:
    """Topics the whole of whose name matches (Java's Matcher.matches)."""
    pattern = compile_subscription(regex)
    return {t for t in topic_names if t not in INTERNAL_TOPICS and pattern.fullmatch(t)}


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.IntEnum):
    """Kafka's MemberState, with its record values."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member of the classic protocol in a consumer group joined with (Kafka's
    ClassicMemberMetadata): its session timeout and its protocols, in preference order."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        return self.protocols[0][0] if self.protocols else ""


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_deadline: float = 0.0
    # Set while the member owes a revocation: it is fenced if it has not revoked by then.
    revocation_deadline: float | None = None
    # Set for a member of the classic protocol (JoinGroup, SyncGroup, Heartbeat).
    classic: ClassicMemberMetadata | None = None
    # A classic member told to rejoin is removed if it has not by then, and one that joined
    # if it has not synced by then (its rebalance timeout, Kafka's consumer group join and
    # sync timeouts for classic members).
    rejoin_deadline: float | None = None
    sync_deadline: float | None = None

    @property
    def session_timeout_ms(self) -> int | None:
        """A classic member's own session timeout; None: the group's."""
        return self.classic.session_timeout_ms if self.classic is not None else None

    def owned(self) -> set[tuple[str, int]]:
        """Every partition the member holds: assigned, or still to be revoked."""
        return {(t, p) for a in (self.assigned, self.pending_revocation)
                for t, parts in a.items() for p in parts}

    def subscription(self) -> tuple[tuple[str, ...], str | None, str | None]:
        return self.subscribed_topic_names, self.subscribed_topic_regex, self.server_assignor


@dataclass
class ConsumerGroup:
    group_id: str
    partition: int
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    # The subscribed topics the target was computed from: name -> (topic id, partitions).
    subscribed_topics: dict[str, tuple[str, int]] = field(default_factory=dict)
    state_timestamp_ms: int = 0
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    offsets_written_at: dict[TopicPartition, int] = field(default_factory=dict)
    dead: bool = False
    # Read by the offsets code, which serves classic and consumer groups alike.
    protocol_type: str = "consumer"

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values() if m.member_epoch != STATIC_LEAVE_EPOCH):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def add_member(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.target.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(
                member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    def owners(self, excluding: str) -> dict[tuple[str, int], str]:
        """Who holds each partition (assigned or pending revocation), but `excluding`."""
        return {tp: m.member_id for m in self.members.values() if m.member_id != excluding
                for tp in m.owned()}

    def all_classic(self, but: str | None = None) -> bool:
        """Every member (but `but`) uses the classic protocol, and there is one."""
        others = [m for m in self.members.values() if m.member_id != but]
        return bool(others) and all(m.classic is not None for m in others)

    def subscribed_topic_names(self, topic_names: set[str]) -> set[str]:
        """The topics some member subscribes to, by name or by regex, among `topic_names`."""
        return {t for m in self.members.values() for t in topics_of(m, topic_names)}


def topics_of(member: ConsumerMember, topic_names: set[str]) -> set[str]:
    """The member's subscribed topics among `topic_names`: named, or matching its regex."""
    names = set(member.subscribed_topic_names) & topic_names
    if member.subscribed_topic_regex is not None:
        names |= matching_topics(member.subscribed_topic_regex, topic_names)
    return names
