"""Classic consumer groups: their states, members and committed offsets, as plain data.

`Group.transition_to` is the one place a group's state changes, checked against
`VALID_PREVIOUS_STATES` (Kafka's ClassicGroupState). Everything else here is bookkeeping the
membership and offset logic reads and updates on the event loop, with no locks.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition


class ClassicGroupState(enum.Enum):
    """A classic (JoinGroup/SyncGroup) group's state, as Kafka 4.0 names it; KIP-848 groups
    have ConsumerGroupState (consumer_group.py)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# The states a group may enter each state from (ClassicGroupState's validPreviousStates).
VALID_PREVIOUS_STATES: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    ClassicGroupState.EMPTY: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.PREPARING_REBALANCE: frozenset({
        ClassicGroupState.EMPTY, ClassicGroupState.STABLE,
        ClassicGroupState.COMPLETING_REBALANCE}),
    ClassicGroupState.COMPLETING_REBALANCE: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.STABLE: frozenset({ClassicGroupState.COMPLETING_REBALANCE}),
    ClassicGroupState.DEAD: frozenset(ClassicGroupState),
}


class GroupError(Exception):
    """A protocol error to answer with; never leaves the coordinator as an exception."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code


class IllegalStateTransition(RuntimeError):
    """A bug: the coordinator tried a transition the table does not allow."""


@dataclass
class JoinResult:
    error_code: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    # (member_id, group_instance_id, metadata): only the leader gets them.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    # KIP-814: a static leader rejoining a stable group gets the members to watch their
    # subscriptions, but must not assign (JoinGroup v9+ says so; older leaders' SyncGroup
    # in a stable group changes nothing anyway).
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    heartbeat_deadline: float = 0.0
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None and not self.join_waiter.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None and not self.sync_waiter.done()

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass
class Group:
    group_id: str
    partition: int
    state: ClassicGroupState = ClassicGroupState.EMPTY
    state_timestamp_ms: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # Members told MEMBER_ID_REQUIRED, by id, with the deadline to rejoin by.
    pending_members: dict[str, float] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # The log offset after the record each offset was written in: a commit whose
    # replication completes later than a newer one's must not overwrite it.
    offsets_written_at: dict[TopicPartition, int] = field(default_factory=dict)
    # When the current join (PreparingRebalance) or sync (CompletingRebalance) phase ends.
    phase_deadline: float = 0.0
    # PreparingRebalance from Empty waits at least group.initial.rebalance.delay.ms.
    join_not_before: float = 0.0

    def transition_to(self, new_state: ClassicGroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[new_state]:
            raise IllegalStateTransition(
                f"group {self.group_id}: {self.state.value} -> {new_state.value} is not legal"
            )
        self.state = new_state
        self.state_timestamp_ms = now_ms

    def add_member(self, member: Member) -> None:
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        if not self.protocol_type:
            self.protocol_type = member.protocol_type

    def known_member(self, member_id: str, instance_id: str | None) -> Member:
        """The member a request names; FENCED_INSTANCE_ID if a static member's instance id
        now belongs to another member id, UNKNOWN_MEMBER_ID if there is no such member."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is not None and current != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    def remove_member(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.leader_id == member_id:
            joined = [m.member_id for m in self.members.values() if m.awaiting_join]
            candidates = joined or list(self.members)
            self.leader_id = candidates[0] if candidates else None
        return member

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the order the first member prefers them."""
        members = list(self.members.values())
        if not members:
            return []
        common = set.intersection(*({name for name, _ in m.protocols} for m in members))
        return [name for name, _ in members[0].protocols if name in common]

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        names = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & set(self.candidate_protocols()))

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; the most votes wins."""
        candidates = self.candidate_protocols()
        votes = dict.fromkeys(candidates, 0)
        for member in self.members.values():
            choice = next(name for name, _ in member.protocols if name in votes)
            votes[choice] += 1
        return max(candidates, key=lambda name: votes[name])

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
