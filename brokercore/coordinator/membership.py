"""The classic group membership protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

A rebalance runs in two phases. PreparingRebalance collects a JoinGroup from every member
(each waits on a future) until all have rejoined or the rebalance timeout passes; members
that did not rejoin are dropped, the generation advances, a protocol is chosen and the
leader gets every member's metadata. CompletingRebalance waits for the leader's SyncGroup,
whose assignments are persisted and handed to every member; the group is then Stable.
Heartbeats keep members alive for their session timeout. Time comes from the coordinator's
clock and deadlines are checked by `expire`, so a fake clock drives all of it in tests.
Membership answers the four requests and decides; `rebalance.py` moves a group through a
generation (prepare, complete the join, store the assignment, Stable).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from brokercore.clock import Clock
from brokercore.protocol.errors import ErrorCode

from .config import CoordinatorConfig
from .groups import Groups
from .rebalance import Rebalance, finish_sync, sync_result
from .state import ClassicGroupState, Group, GroupError, JoinResult, Member, SyncResult

log = logging.getLogger(__name__)


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    # JoinGroup v4+: a member without an id is first given one (MEMBER_ID_REQUIRED).
    require_known_member: bool = True


JoinOutcome = JoinResult | asyncio.Future[JoinResult]


class ClassicMembersOfConsumerGroups(Protocol):
    """Classic-protocol members of KIP-848 groups (`migration.py`), which the coordinator
    plugs in: Kafka serves a JoinGroup, SyncGroup, Heartbeat or LeaveGroup for a consumer
    group with members there, whatever the migration policy."""

    def serves(self, group_id: str) -> bool: ...

    async def join(self, req: JoinRequest) -> JoinResult: ...

    def sync(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
             protocol: tuple[str | None, str | None]) -> SyncResult: ...

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  instance_id: str | None) -> ErrorCode: ...

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[ErrorCode]: ...


class Membership:
    def __init__(self, groups: Groups, clock: Clock, config: CoordinatorConfig,
                 yield_to_classic: Callable[[str], None]) -> None:
        self.groups = groups
        self.clock = clock
        self.config = config
        # Before a join: an empty KIP-848 group of that id becomes a classic one, or the
        # join is refused (ConsumerProtocol.yield_to_classic).
        self.yield_to_classic = yield_to_classic
        self.in_consumer_groups: ClassicMembersOfConsumerGroups | None = None
        self.rebalance = Rebalance(groups, clock, config)

    def _consumer_group_serves(self, group_id: str) -> ClassicMembersOfConsumerGroups | None:
        """The classic members of a consumer group with members of that id, if there is one."""
        bridge = self.in_consumer_groups
        if bridge is not None and group_id and bridge.serves(group_id):
            return bridge
        return None

    @property
    def now(self) -> float:
        return self.clock.monotonic()

    # -- JoinGroup ------------------------------------------------------------------------
    async def join(self, req: JoinRequest) -> JoinResult:
        try:
            bridge = self._consumer_group_serves(req.group_id)
            if bridge is not None:
                return await bridge.join(req)
            outcome = self._join(req)
        except GroupError as exc:
            return JoinResult(exc.error_code, req.member_id)
        if isinstance(outcome, JoinResult):
            return outcome
        return await outcome

    def _join(self, req: JoinRequest) -> JoinOutcome:
        if not req.group_id:
            raise GroupError(ErrorCode.INVALID_GROUP_ID)
        self.groups.check_coordinator(req.group_id)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            raise GroupError(ErrorCode.INVALID_SESSION_TIMEOUT)
        self.yield_to_classic(req.group_id)
        group = self.groups.classic.get(req.group_id)
        if group is None:
            if req.member_id:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups.create_classic(req.group_id)
        if group.state is ClassicGroupState.DEAD:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, req.protocols):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if not req.member_id:
            return self._join_new_member(group, req)
        return self._join_known_member(group, req)

    def _join_new_member(self, group: Group, req: JoinRequest) -> JoinOutcome:
        member_id = f"{req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_id = group.static_members.get(req.group_instance_id)
            if old_id is not None:
                return self._replace_static_member(group, old_id, member_id, req)
        elif req.require_known_member:
            self._check_group_size(group)
            group.pending_members[member_id] = self.now + req.session_timeout_ms / 1000
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        return self._add_member(group, member_id, req)

    def _check_group_size(self, group: Group) -> None:
        if len(group.members) + len(group.pending_members) >= self.config.max_size:
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED)

    def _add_member(self, group: Group, member_id: str, req: JoinRequest) -> JoinOutcome:
        if len(group.members) >= self.config.max_size:
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED)
        member = Member(
            member_id, req.group_instance_id, req.client_id, req.client_host,
            req.session_timeout_ms, req.rebalance_timeout_ms, req.protocol_type,
            list(req.protocols), heartbeat_deadline=self.now + req.session_timeout_ms / 1000,
        )
        waiter = self._await_join(member)
        group.add_member(member)
        log.info("group %s: member %s joined (%s)", group.group_id, member_id, req.client_host)
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            self.rebalance.extend_initial_delay(group)
            self.rebalance.try_complete_join(group)
        else:
            self.rebalance.prepare(group, f"member {member_id} joined")
        return waiter

    def _join_known_member(self, group: Group, req: JoinRequest) -> JoinOutcome:
        if group.pending_members.pop(req.member_id, None) is not None:
            return self._add_member(group, req.member_id, req)
        member = group.known_member(req.member_id, req.group_instance_id)
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            return self._rejoin(group, member, req, rebalance=False)
        same = member.same_protocols(req.protocols)
        if group.state is ClassicGroupState.COMPLETING_REBALANCE and same:
            return self.rebalance.join_result(group, member)  # it lost our join response
        if group.state is ClassicGroupState.STABLE and same and member.member_id != group.leader_id:
            return self.rebalance.join_result(group, member)
        # A changed subscription, or the leader asking to reassign: a new generation.
        return self._rejoin(group, member, req, rebalance=True)

    def _rejoin(
        self, group: Group, member: Member, req: JoinRequest, rebalance: bool
    ) -> JoinOutcome:
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        waiter = self._await_join(member)
        if rebalance:
            self.rebalance.prepare(group, f"member {member.member_id} rejoined")
        else:
            self.rebalance.try_complete_join(group)
        return waiter

    def _replace_static_member(
        self, group: Group, old_id: str, new_id: str, req: JoinRequest
    ) -> JoinOutcome:
        """A static member restarted: it takes its old place under a new member id."""
        member = group.members[old_id]
        self.fail_waiters(member, ErrorCode.FENCED_INSTANCE_ID)
        del group.members[old_id]
        member.member_id = new_id
        group.members[new_id] = member
        group.static_members[req.group_instance_id or ""] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        member.heartbeat_deadline = self.now + req.session_timeout_ms / 1000
        log.info("group %s: static member %s now %s", group.group_id, req.group_instance_id,
                 new_id)
        if group.state is ClassicGroupState.STABLE and member.same_protocols(req.protocols):
            result = self.rebalance.join_result(group, member)
            result.skip_assignment = new_id == group.leader_id
            return result
        rebalance = group.state is not ClassicGroupState.PREPARING_REBALANCE
        return self._rejoin(group, member, req, rebalance=rebalance)

    def _await_join(self, member: Member) -> asyncio.Future[JoinResult]:
        if member.awaiting_join:
            assert member.join_waiter is not None
            member.join_waiter.set_result(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS,
                                                     member.member_id))
        member.join_waiter = asyncio.get_running_loop().create_future()
        return member.join_waiter

    # -- SyncGroup ------------------------------------------------------------------------
    async def sync(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
        protocol: tuple[str | None, str | None], assignments: dict[str, bytes],
    ) -> SyncResult:
        try:
            bridge = self._consumer_group_serves(group_id)
            if bridge is not None:
                return bridge.sync(group_id, generation_id, member_id, instance_id, protocol)
            outcome = self._sync(group_id, generation_id, member_id, instance_id, protocol,
                                 assignments)
        except GroupError as exc:
            return SyncResult(exc.error_code)
        if isinstance(outcome, SyncResult):
            return outcome
        return await outcome

    def _sync(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
        protocol: tuple[str | None, str | None], assignments: dict[str, bytes],
    ) -> SyncResult | asyncio.Future[SyncResult]:
        group = self._live_group(group_id)
        member = group.known_member(member_id, instance_id)
        if generation_id != group.generation_id:
            raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        protocol_type, protocol_name = protocol
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)
        self.rebalance.heard_from(member)
        if group.state is ClassicGroupState.STABLE:
            return sync_result(group, member)
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        finish_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_waiter = waiter
        if member_id == group.leader_id:
            self.rebalance.store_assignment(group, assignments)
        return waiter

    # -- Heartbeat and LeaveGroup ---------------------------------------------------------
    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        try:
            bridge = self._consumer_group_serves(group_id)
            if bridge is not None:
                return bridge.heartbeat(group_id, generation_id, member_id, instance_id)
            group = self._live_group(group_id)
            member = group.known_member(member_id, instance_id)
        except GroupError as exc:
            return exc.error_code
        self.rebalance.heard_from(member)
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def leave(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members by (member_id, group_instance_id): a top-level and per-member error."""
        try:
            self.groups.check_coordinator(group_id)
            bridge = self._consumer_group_serves(group_id)
            if bridge is not None:
                return ErrorCode.NONE, bridge.leave(group_id, leaving)
            group = self.groups.classic.get(group_id)
            if group is None or group.state is ClassicGroupState.DEAD:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        except GroupError as exc:
            return exc.error_code, [exc.error_code] * len(leaving)
        errors = [self._leave_one(group, member_id, instance_id)
                  for member_id, instance_id in leaving]
        return ErrorCode.NONE, errors

    def _leave_one(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id not in ("", current):
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = current
        if group.pending_members.pop(member_id, None) is not None:
            self.rebalance.try_complete_join(group)
            return ErrorCode.NONE
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.remove_member(group, member_id, "left the group")
        return ErrorCode.NONE

    def remove_member(self, group: Group, member_id: str, reason: str) -> None:
        member = group.remove_member(member_id)
        if member is None:
            return
        log.info("group %s: member %s %s", group.group_id, member_id, reason)
        self.fail_waiters(member, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
            self.rebalance.prepare(group, f"member {member_id} {reason}")
        else:
            self.rebalance.try_complete_join(group)

    def fail_waiters(self, member: Member, code: ErrorCode) -> None:
        waiter, member.join_waiter = member.join_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(JoinResult(code, member.member_id))
        finish_sync(member, SyncResult(code))

    # -- timeouts -------------------------------------------------------------------------
    def expire(self, group: Group) -> None:
        """Act on every deadline that has passed: sessions, pending members, phases."""
        now = self.now
        for member_id, deadline in list(group.pending_members.items()):
            if now >= deadline:
                del group.pending_members[member_id]
                self.rebalance.try_complete_join(group)
        for member in list(group.members.values()):
            alive = member.awaiting_join or member.awaiting_sync
            if now >= member.heartbeat_deadline and not alive:
                self.remove_member(group, member.member_id, "session timed out")
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            self.rebalance.try_complete_join(group)
        elif group.state is ClassicGroupState.COMPLETING_REBALANCE and now >= group.phase_deadline:
            for member in list(group.members.values()):
                if not member.awaiting_sync:
                    self.remove_member(group, member.member_id, "did not sync in time")

    # -- helpers --------------------------------------------------------------------------
    def _live_group(self, group_id: str) -> Group:
        self.groups.check_coordinator(group_id)
        group = self.groups.classic.get(group_id)
        if group is None or group.state is ClassicGroupState.EMPTY:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is ClassicGroupState.DEAD:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return group
