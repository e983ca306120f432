"""A classic group's generations: a rebalance from PreparingRebalance to Stable.

`prepare` starts a rebalance (after the initial delay when the group was Empty);
`try_complete_join` ends the join phase once every member rejoined or the rebalance timeout
passed, and starts the next generation; `store_assignment` writes the leader's assignment
to `__consumer_offsets` and, once that write is replicated, makes the group Stable and
answers every SyncGroup waiting. Membership (the four requests) decides; this module moves
the group through its states.
"""

from __future__ import annotations

import logging

from brokercore.clock import Clock
from brokercore.protocol.errors import ErrorCode

from .config import CoordinatorConfig
from .groups import Groups
from .records import GroupRecord, MemberRecord, group_key, group_value
from .state import ClassicGroupState, Group, GroupError, JoinResult, Member, SyncResult

log = logging.getLogger(__name__)


class Rebalance:
    def __init__(self, groups: Groups, clock: Clock, config: CoordinatorConfig) -> None:
        self.groups = groups
        self.clock = clock
        self.config = config

    @property
    def now(self) -> float:
        return self.clock.monotonic()

    def join_result(self, group: Group, member: Member) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        members = []
        if is_leader and group.protocol_name is not None:
            members = [(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                       for m in group.members.values()]
        return JoinResult(
            ErrorCode.NONE, member.member_id, group.generation_id, group.protocol_type,
            group.protocol_name, group.leader_id or "", members,
        )

    def prepare(self, group: Group, reason: str) -> None:
        if group.state is ClassicGroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
                finish_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        now = self.now
        timeout = group.max_rebalance_timeout_ms() / 1000
        if group.state is ClassicGroupState.EMPTY:
            delay = self.config.initial_rebalance_delay_ms / 1000
            group.join_not_before = now + min(delay, timeout)
        else:
            group.join_not_before = now
        group.phase_deadline = now + timeout
        group.transition_to(ClassicGroupState.PREPARING_REBALANCE, self.clock.time_ms())
        log.info("group %s: preparing to rebalance generation %d: %s", group.group_id,
                 group.generation_id, reason)
        self.try_complete_join(group)

    def extend_initial_delay(self, group: Group) -> None:
        """New members during the initial delay push it back, up to the rebalance timeout."""
        if group.join_not_before > self.now:
            delay = self.config.initial_rebalance_delay_ms / 1000
            group.join_not_before = min(self.now + delay, group.phase_deadline)

    def try_complete_join(self, group: Group) -> None:
        if group.state is not ClassicGroupState.PREPARING_REBALANCE:
            return
        now = self.now
        if now >= group.phase_deadline or (
            now >= group.join_not_before and group.all_members_joined()
        ):
            self.complete_join(group)

    def complete_join(self, group: Group) -> None:
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            log.info("group %s: member %s did not rejoin in time", group.group_id,
                     member.member_id)
            group.remove_member(member.member_id)
        group.generation_id += 1
        now_ms = self.clock.time_ms()
        if not group.members:
            group.protocol_name = None
            group.transition_to(ClassicGroupState.EMPTY, now_ms)
            self.persist_group(group)
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            return
        group.protocol_name = group.select_protocol()
        group.transition_to(ClassicGroupState.COMPLETING_REBALANCE, now_ms)
        group.phase_deadline = self.now + group.max_rebalance_timeout_ms() / 1000
        log.info("group %s: generation %d with %d member(s), protocol %s, leader %s",
                 group.group_id, group.generation_id, len(group.members), group.protocol_name,
                 group.leader_id)
        for member in group.members.values():
            member.heartbeat_deadline = self.now + member.session_timeout_ms / 1000
            waiter, member.join_waiter = member.join_waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_result(self.join_result(group, member))

    def store_assignment(self, group: Group, assignments: dict[str, bytes]) -> None:
        """Store the leader's assignment; members receive it once the ISR has it."""
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        try:
            written_at = self.persist_group(group, raise_errors=True)
        except GroupError as exc:
            self._assignment_failed(group, exc)
            return
        generation = group.generation_id
        self.groups.after_replicated(
            group.partition, written_at,
            lambda error: self._assignment_stored(group, generation, error))

    def _assignment_stored(self, group: Group, generation: int, error: GroupError | None
                           ) -> None:
        if (self.groups.classic.get(group.group_id) is not group
                or group.generation_id != generation
                or group.state is not ClassicGroupState.COMPLETING_REBALANCE):
            return  # the group moved on while the write replicated (Kafka ignores it too)
        if error is not None:
            self._assignment_failed(group, error)
            return
        group.transition_to(ClassicGroupState.STABLE, self.clock.time_ms())
        log.info("group %s: generation %d is stable", group.group_id, group.generation_id)
        for member in group.members.values():
            self.heard_from(member)
            finish_sync(member, sync_result(group, member))

    def _assignment_failed(self, group: Group, error: GroupError) -> None:
        for member in group.members.values():
            member.assignment = b""
            finish_sync(member, SyncResult(error.error_code))
        self.prepare(group, f"storing the assignment failed: {error}")

    def persist_group(self, group: Group, *, raise_errors: bool = False) -> int:
        """Write the group's metadata record (after a sync or on becoming Empty); the offset
        to wait for, or -1 if the write failed and `raise_errors` is off."""
        try:
            return self.groups.write(group.partition, [(group_key(group.group_id),
                                                        group_value(group_record(group)))])
        except GroupError as exc:
            log.warning("group %s: cannot store its metadata: %s", group.group_id, exc)
            if raise_errors:
                raise
            return -1

    def heard_from(self, member: Member) -> None:
        member.heartbeat_deadline = self.now + member.session_timeout_ms / 1000


def sync_result(group: Group, member: Member) -> SyncResult:
    return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name,
                      member.assignment)


def finish_sync(member: Member, result: SyncResult) -> None:
    waiter, member.sync_waiter = member.sync_waiter, None
    if waiter is not None and not waiter.done():
        waiter.set_result(result)


def group_record(group: Group) -> GroupRecord:
    protocol = group.protocol_name
    members = tuple(
        MemberRecord(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.rebalance_timeout_ms, m.session_timeout_ms,
            m.metadata_for(protocol) if protocol else b"", m.assignment,
        )
        for m in group.members.values()
    ) if protocol else ()
    return GroupRecord(group.protocol_type or "", group.generation_id, protocol,
                       group.leader_id, group.state_timestamp_ms, members)
