"""The KIP-848 consumer group protocol: ConsumerGroupHeartbeat, and its deadlines.

One heartbeat does everything the classic protocol spreads over JoinGroup, SyncGroup,
Heartbeat and LeaveGroup: it joins (member epoch 0), leaves (-1, or -2 for a static member
that will be back), updates the subscription, and answers with the member's epoch and, when
it changed, its assignment. The broker computes the assignment itself (`assignors.py`) and
moves each member towards it without double ownership (`reconciliation.py`).

Each heartbeat applies its changes in memory, writes them as Kafka's records
(`consumer_records.py`) to the group's `__consumer_offsets` partition, and answers only
once the in-sync replicas have them, so a new coordinator replays what members were told.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from brokercore.clock import Clock
from brokercore.protocol.errors import ErrorCode

from . import consumer_records as cr
from .assignors import ASSIGNORS
from .config import CoordinatorConfig
from .consumer_group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    compile_subscription,
    topics_of,
)
from .groups import Groups
from .reconciliation import MemberAssignment, current, reconcile
from .records import KeyValue, group_key
from .state import ClassicGroupState, Group, GroupError

log = logging.getLogger(__name__)


class Migrations(Protocol):
    """Online migration between the protocols (`migration.py`), which the coordinator
    plugs in: a classic group with members that a consumer member joins, and a consumer
    group whose last consumer member left."""

    def upgrade(self, classic: Group, records: list[KeyValue]) -> ConsumerGroup | None: ...

    def downgrade(self, group: ConsumerGroup, records: list[KeyValue],
                  generation: int) -> bool: ...


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class HeartbeatResult:
    error_code: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


class ConsumerProtocol:
    def __init__(self, groups: Groups, clock: Clock, config: CoordinatorConfig,
                 topics: Callable[[], dict[str, tuple[str, int]]],
                 reload: Callable[[int], None],
                 group_configs: Callable[[str], dict[str, str]] = lambda group_id: {},
                 ) -> None:
        self.groups = groups
        self.clock = clock
        self.config = config
        self.topics = topics  # topic name -> (topic id, partition count)
        # PartitionLoads.reload: after a failed write, memory is ahead of the log.
        self.reload = reload
        self.migrations: Migrations | None = None
        # A group's own configs (IncrementalAlterConfigs on a GROUP resource), over the
        # broker's: consumer.session.timeout.ms and consumer.heartbeat.interval.ms.
        self.group_configs = group_configs

    def session_timeout_ms(self, group_id: str) -> int:
        value = self.group_configs(group_id).get("consumer.session.timeout.ms")
        return int(value) if value is not None else self.config.consumer_session_timeout_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        value = self.group_configs(group_id).get("consumer.heartbeat.interval.ms")
        return int(value) if value is not None else self.config.consumer_heartbeat_interval_ms

    @property
    def now(self) -> float:
        return self.clock.monotonic()

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------
    async def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        records: list[KeyValue] = []
        try:
            _validate(req)
            partition = self.groups.check_coordinator(req.group_id)
            try:
                result = self._heartbeat(req, records)
            finally:  # an error after some change still stores that change
                if records:
                    await self.store(partition, records)
        except GroupError as exc:
            message = str(exc) if str(exc) != exc.error_code.name else None
            return HeartbeatResult(exc.error_code, message, req.member_id or None)
        return result

    async def store(self, partition: int, records: list[KeyValue]) -> None:
        """Write; answer once replicated. A failed append leaves memory ahead of the log,
        so the partition is read again from the log."""
        try:
            written_at = self.groups.write(partition, records)
        except GroupError:
            self.reload(partition)
            raise
        await self.groups.replicated(partition, written_at)

    def _heartbeat(self, req: HeartbeatRequest, records: list[KeyValue]) -> HeartbeatResult:
        group = self._group_for(req, records)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group, req, records)
        member, joined = self._member_for(group, req, records)
        member.session_deadline = self.now + self.session_timeout_ms(group.group_id) / 1000
        bump = self._update_member(group, member, req, joined, records)
        before, after = self.advance(group, member, bump, req.owned, records)
        full = req.member_epoch == JOIN_EPOCH or (
            req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
            and req.owned is not None)
        changed = full or after.assigned != before.assigned
        return HeartbeatResult(
            ErrorCode.NONE, None, member.member_id, member.member_epoch,
            self.heartbeat_interval_ms(group.group_id), after.assigned if changed else None)

    def advance(self, group: ConsumerGroup, member: ConsumerMember, bump: bool,
                reported: Assignment | None, records: list[KeyValue],
                ) -> tuple[MemberAssignment, MemberAssignment]:
        """A new group epoch if `bump` or the subscribed topics moved, the target for it,
        and the member one step towards its part (`reported`: what it says it owns)."""
        if self.refresh_topics(group, records) or bump:
            group.group_epoch += 1
            records.append((cr.key(cr.GROUP_EPOCH_KEY, group.group_id),
                            cr.epoch_value(group.group_epoch)))
        self._compute_target(group, records)
        before = current(member)
        after = reconcile(member, group.assignment_epoch, group.target.get(member.member_id, {}),
                          group.owners(member.member_id), reported)
        if after != before:
            self._apply(group, member, after, records)
        return before, after

    # -- finding the group and the member -------------------------------------------------
    def _group_for(self, req: HeartbeatRequest, records: list[KeyValue]) -> ConsumerGroup:
        group_id = req.group_id
        group = self.groups.consumer.get(group_id)
        if group is not None:
            return group
        classic = self.groups.classic.get(group_id)
        if classic is not None and not (classic.state is ClassicGroupState.EMPTY
                                        and req.member_epoch == JOIN_EPOCH):
            if req.member_epoch == JOIN_EPOCH and self.migrations is not None:
                upgraded = self.migrations.upgrade(classic, records)
                if upgraded is not None:
                    return upgraded
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND,
                             f"Group {group_id} is not a consumer group.")
        if req.member_epoch != JOIN_EPOCH:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {req.member_id} is not a member of group {group_id}.")
        group = ConsumerGroup(group_id, self.groups.partition_of(group_id),
                              state_timestamp_ms=self.clock.time_ms())
        if classic is not None:  # an empty classic group becomes a consumer group
            group.offsets, group.offsets_written_at = classic.offsets, classic.offsets_written_at
            del self.groups.classic[group_id]
            records.append((group_key(group_id), None))
            log.info("group %s: empty classic group converted to a consumer group", group_id)
        self.groups.consumer[group_id] = group
        return group

    def _member_for(self, group: ConsumerGroup, req: HeartbeatRequest,
                    records: list[KeyValue]) -> tuple[ConsumerMember, bool]:
        """The member the heartbeat is from, and whether it (re)joined just now."""
        if req.member_epoch != JOIN_EPOCH:
            member = group.members.get(req.member_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not "
                                 f"a member of group {group.group_id}.")
            _check_epoch(member, req)
            return member, False
        member_id = req.member_id or str(uuid.uuid4())
        if req.instance_id is not None and req.instance_id in group.static_members:
            return self._replace_static(group, req, member_id, records), False
        old = group.members.get(member_id)
        if old is not None:  # a fenced member rejoining under its id: a fresh start
            self.remove(group, old, "rejoined with epoch 0", records)
        if len(group.members) >= self.config.consumer_max_size:
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of "
                             f"{self.config.consumer_max_size} members.")
        member = ConsumerMember(member_id, instance_id=req.instance_id)
        group.add_member(member)
        log.info("group %s: member %s joined (%s)", group.group_id, member_id, req.client_host)
        return member, True

    def _replace_static(self, group: ConsumerGroup, req: HeartbeatRequest, member_id: str,
                        records: list[KeyValue]) -> ConsumerMember:
        """A static member back under a new member id takes over its assignment."""
        assert req.instance_id is not None
        old = group.members[group.static_members[req.instance_id]]
        if old.member_epoch != STATIC_LEAVE_EPOCH:
            raise GroupError(ErrorCode.UNRELEASED_INSTANCE_ID,
                             f"Static member {old.member_id} with instance id "
                             f"{req.instance_id} is not released yet.")
        target = group.target.get(old.member_id, {})
        group.remove_member(old.member_id)
        records.extend(cr.member_tombstones(group.group_id, old.member_id))
        member = ConsumerMember(**{**old.__dict__, "member_id": member_id,
                                   "member_epoch": 0, "previous_member_epoch": 0})
        group.add_member(member)
        group.target[member_id] = target
        records.append((cr.key(cr.TARGET_MEMBER_KEY, group.group_id, member_id),
                        cr.target_value(target)))
        records.append(_metadata_record(group, member))
        log.info("group %s: static member %s is back as %s", group.group_id, req.instance_id,
                 member_id)
        return member

    # -- subscription, topics and the target assignment -----------------------------------
    def _update_member(self, group: ConsumerGroup, member: ConsumerMember,
                       req: HeartbeatRequest, joined: bool, records: list[KeyValue]) -> bool:
        """Take the heartbeat's non-null fields; True if the subscription changed."""
        before_subscription = member.subscription()
        before = cr.member_value(member_metadata(member))
        if req.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
        if req.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = req.subscribed_topic_regex or None
        if req.server_assignor is not None:
            member.server_assignor = req.server_assignor
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        member.client_id, member.client_host = req.client_id, req.client_host
        if joined or cr.member_value(member_metadata(member)) != before:
            records.append(_metadata_record(group, member))
        return joined or member.subscription() != before_subscription

    def refresh_topics(self, group: ConsumerGroup, records: list[KeyValue]) -> bool:
        """Follow the subscribed topics' creation and partition counts; True if they moved
        (stored as Kafka's key-4 record, so a reload compares with what the group saw)."""
        topics = self.topics()
        names = group.subscribed_topic_names(set(topics))
        subscribed = {name: topics[name] for name in names}
        if subscribed == group.subscribed_topics:
            return False
        group.subscribed_topics = subscribed
        records.append((cr.key(cr.SUBSCRIPTION_METADATA_KEY, group.group_id),
                        cr.subscription_metadata_value(subscribed)))
        return True

    def _compute_target(self, group: ConsumerGroup, records: list[KeyValue]) -> None:
        if group.group_epoch <= group.assignment_epoch:
            return
        names = set(group.subscribed_topics)
        subscriptions = {m.member_id: topics_of(m, names)
                         for m in group.members.values()}
        assignor = self.assignor_of(group)
        target = ASSIGNORS[assignor](subscriptions, group.subscribed_topics, group.target)
        for member_id, assignment in target.items():
            if group.target.get(member_id) != assignment:
                records.append((cr.key(cr.TARGET_MEMBER_KEY, group.group_id, member_id),
                                cr.target_value(assignment)))
        group.target = target
        group.assignment_epoch = group.group_epoch
        records.append((cr.key(cr.TARGET_EPOCH_KEY, group.group_id),
                        cr.epoch_value(group.assignment_epoch)))
        log.info("group %s: target assignment of epoch %d by %s for %d member(s)",
                 group.group_id, group.assignment_epoch, assignor, len(target))

    def assignor_of(self, group: ConsumerGroup) -> str:
        """The assignor most members ask for; else the broker's first."""
        wanted = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        if wanted:
            return min(wanted, key=lambda name: (-wanted[name], name))
        return self.config.consumer_assignors[0]

    def _apply(self, group: ConsumerGroup, member: ConsumerMember, after: MemberAssignment,
               records: list[KeyValue]) -> None:
        member.member_epoch, member.previous_member_epoch = (after.member_epoch,
                                                              after.previous_member_epoch)
        member.state, member.assigned = after.state, after.assigned
        member.pending_revocation = after.pending_revocation
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            if member.revocation_deadline is None and member.rebalance_timeout_ms > 0:
                member.revocation_deadline = self.now + member.rebalance_timeout_ms / 1000
        else:
            member.revocation_deadline = None
        records.append((cr.key(cr.CURRENT_ASSIGNMENT_KEY, group.group_id, member.member_id),
                        cr.current_value(after)))

    # -- leaving --------------------------------------------------------------------------
    def _leave(self, group: ConsumerGroup, req: HeartbeatRequest,
               records: list[KeyValue]) -> HeartbeatResult:
        member = group.members.get(req.member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a "
                             f"member of group {group.group_id}.")
        if req.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # It keeps its partitions until it is back or its session expires.
            member.member_epoch = STATIC_LEAVE_EPOCH
            records.append((cr.key(cr.CURRENT_ASSIGNMENT_KEY, group.group_id, member.member_id),
                            cr.current_value(current(member))))
            log.info("group %s: static member %s left for now", group.group_id,
                     member.member_id)
        else:
            epoch = group.group_epoch
            self.remove(group, member, "left the group", records)
            if self.migrations is not None:
                self.migrations.downgrade(group, records, epoch)
        return HeartbeatResult(ErrorCode.NONE, None, member.member_id, req.member_epoch,
                               self.heartbeat_interval_ms(group.group_id))

    def remove(self, group: ConsumerGroup, member: ConsumerMember, reason: str,
                records: list[KeyValue]) -> None:
        """The member is gone: its partitions are free and the group gets a new epoch."""
        group.remove_member(member.member_id)
        records.extend(cr.member_tombstones(group.group_id, member.member_id))
        group.group_epoch += 1
        records.append((cr.key(cr.GROUP_EPOCH_KEY, group.group_id),
                        cr.epoch_value(group.group_epoch)))
        log.info("group %s: member %s %s; group epoch %d", group.group_id, member.member_id,
                 reason, group.group_epoch)

    # -- a classic member joining ------------------------------------------------------------
    def yield_to_classic(self, group_id: str) -> None:
        """Before a JoinGroup: an empty consumer group of that id becomes a classic group
        (with its offsets); one with members answers INCONSISTENT_GROUP_PROTOCOL."""
        group = self.groups.consumer.get(group_id)
        if group is None:
            return
        if group.members:
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                             f"Group {group_id} is a consumer group with members.")
        del self.groups.consumer[group_id]
        classic = self.groups.create_classic(group_id)
        classic.offsets, classic.offsets_written_at = group.offsets, group.offsets_written_at
        try:
            self.groups.write(group.partition, cr.group_tombstones(group.group_id))
        except GroupError as exc:
            log.warning("group %s: cannot store its conversion: %s", group_id, exc)
        log.info("group %s: empty consumer group converted to a classic group", group_id)

    # -- deadlines ------------------------------------------------------------------------
    def expire(self, group: ConsumerGroup) -> None:
        """Remove members whose session lapsed, or that did not revoke in time."""
        now, records, epoch = self.now, list[KeyValue](), group.group_epoch
        for member in list(group.members.values()):
            if now >= member.session_deadline:
                self.remove(group, member, "session timed out", records)
            elif member.revocation_deadline is not None and now >= member.revocation_deadline:
                self.remove(group, member, "did not revoke its partitions in time", records)
            elif member.rejoin_deadline is not None and now >= member.rejoin_deadline:
                self.remove(group, member, "did not rejoin in time", records)
            elif member.sync_deadline is not None and now >= member.sync_deadline:
                self.remove(group, member, "did not sync in time", records)
        if records and self.migrations is not None:
            self.migrations.downgrade(group, records, epoch)
        if records:
            try:
                self.groups.write(group.partition, records)
            except GroupError as exc:
                log.warning("group %s: cannot store expired members: %s", group.group_id, exc)
                self.reload(group.partition)

    def restored(self, group: ConsumerGroup) -> None:
        """After a load: members have one session (and revocation) timeout to come back."""
        now = self.now
        for member in group.members.values():
            session_ms = member.session_timeout_ms or self.session_timeout_ms(group.group_id)
            member.session_deadline = now + session_ms / 1000
            if member.state is MemberState.UNREVOKED_PARTITIONS and member.rebalance_timeout_ms > 0:
                member.revocation_deadline = now + member.rebalance_timeout_ms / 1000


def _validate(req: HeartbeatRequest) -> None:
    def invalid(message: str) -> GroupError:
        return GroupError(ErrorCode.INVALID_REQUEST, message)

    if not req.group_id:
        raise invalid("GroupId can't be empty.")
    if req.member_epoch < STATIC_LEAVE_EPOCH:
        raise invalid(f"MemberEpoch {req.member_epoch} is invalid.")
    if req.member_epoch != JOIN_EPOCH and not req.member_id:
        raise invalid("MemberId can't be empty.")
    if req.member_epoch == JOIN_EPOCH:
        _validate_join(req)
    if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
        raise invalid("InstanceId can't be null when leaving with epoch -2.")
    if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
        raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                         f"ServerAssignor {req.server_assignor} is not supported.")
    if req.subscribed_topic_regex:
        try:
            compile_subscription(req.subscribed_topic_regex)
        except re.error as exc:
            raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                             f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not "
                             f"a valid regular expression: {exc}.") from None


def _validate_join(req: HeartbeatRequest) -> None:
    """What the first heartbeat of a (re-)joining member must carry."""
    if req.rebalance_timeout_ms == -1:
        raise GroupError(ErrorCode.INVALID_REQUEST,
                         "RebalanceTimeoutMs must be provided in first request.")
    if req.owned:
        raise GroupError(ErrorCode.INVALID_REQUEST,
                         "TopicPartitions must be empty when (re-)joining.")
    if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
        raise GroupError(ErrorCode.INVALID_REQUEST,
                         "SubscribedTopicNames or SubscribedTopicRegex must be set in "
                         "first request.")


def _check_epoch(member: ConsumerMember, req: HeartbeatRequest) -> None:
    """FENCED_MEMBER_EPOCH unless the epoch is the member's, or its previous one with no
    more than its current partitions (the answer that bumped it was lost)."""
    if req.member_epoch == member.member_epoch:
        return
    lost_answer = req.member_epoch == member.previous_member_epoch and req.owned is not None \
        and all(parts <= member.assigned.get(t, frozenset()) for t, parts in req.owned.items())
    if req.member_epoch > member.member_epoch or not lost_answer:
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The member epoch {req.member_epoch} is fenced: the group knows "
                         f"member {member.member_id} at epoch {member.member_epoch}.")


def member_metadata(member: ConsumerMember) -> cr.MemberMetadata:
    return cr.MemberMetadata(member.instance_id, member.rack_id, member.client_id,
                             member.client_host, member.subscribed_topic_names,
                             member.subscribed_topic_regex, member.rebalance_timeout_ms,
                             member.server_assignor, member.classic)


def _metadata_record(group: ConsumerGroup, member: ConsumerMember) -> KeyValue:
    return (cr.key(cr.MEMBER_METADATA_KEY, group.group_id, member.member_id),
            cr.member_value(member_metadata(member)))
