"""Groups with members moving between the classic and the consumer protocol, as Kafka 4.0 does.

- **Upgrade.** A consumer-protocol member (ConsumerGroupHeartbeat, epoch 0) joining a
  classic group of consumers that has members turns it into a consumer group, when
  `group.consumer.migration.policy` allows it (`bidirectional`, the default, or `upgrade`).
  Each classic member becomes a member of the consumer group that keeps using the classic
  protocol, with its subscription and its current assignment; the group epoch, the target's
  epoch and the members' epochs are the generation. The new member then joins as usual,
  and the assignor moves partitions to it from their owners without two owners at once.
- **Classic members in a consumer group** are served through JoinGroup, SyncGroup,
  Heartbeat and LeaveGroup here, whatever the policy (Kafka's classicGroup*ToConsumerGroup).
  Their generation is their member epoch. A JoinGroup updates the subscription, reports
  the partitions the member owns (its subscription's owned partitions; none for eager
  assignors, which revoke before they join), moves it one step towards its target and
  answers as to a follower (the leader is nobody: the broker assigns). SyncGroup gives its
  assigned partitions. A Heartbeat answers REBALANCE_IN_PROGRESS while the member lags the
  group epoch, owes a revocation, or can take partitions others have released, so the
  client rejoins.
- **Downgrade.** When the last consumer-protocol member leaves or is fenced and classic
  members remain, the group becomes a classic group again (`bidirectional` or
  `downgrade`): members, their protocols and assignments are kept, the generation is the
  group epoch before the leave, and a rebalance starts, which the members join at their
  next heartbeat.

Each conversion writes, in the same batch as the change that caused it, the tombstones of
the old group's records and the records of the new one, so a new coordinator replays the
group as it now is.
"""

from __future__ import annotations

import logging
import uuid

from brokercore.clock import Clock
from brokercore.protocol.errors import ErrorCode

from . import consumer_records as cr
from .config import CoordinatorConfig
from .consumer_group import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from .consumer_protocol import ConsumerProtocol, member_metadata
from .embedded_protocol import (
    TopicPartitions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from .groups import Groups
from .membership import JoinRequest, Membership
from .rebalance import group_record
from .reconciliation import current
from .records import KeyValue, group_key, group_value
from .state import ClassicGroupState, Group, GroupError, JoinResult, Member, SyncResult

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "consumer"


class Migration:
    def __init__(self, groups: Groups, clock: Clock, config: CoordinatorConfig,
                 consumer: ConsumerProtocol, membership: Membership) -> None:
        self.groups = groups
        self.clock = clock
        self.config = config
        self.consumer = consumer
        self.membership = membership

    @property
    def now(self) -> float:
        return self.clock.monotonic()

    def _ids(self) -> dict[str, str]:
        return {name: topic_id for name, (topic_id, _) in self.consumer.topics().items()}

    def _by_id(self, partitions: TopicPartitions) -> Assignment:
        ids = self._ids()
        return {ids[t]: parts for t, parts in partitions.items() if t in ids and parts}

    def _by_name(self, assignment: Assignment) -> TopicPartitions:
        names = {topic_id: name for name, topic_id in self._ids().items()}
        return {names[t]: parts for t, parts in assignment.items() if t in names}

    # -- upgrade --------------------------------------------------------------------------
    def upgrade(self, classic: Group, records: list[KeyValue]) -> ConsumerGroup | None:
        """The consumer group a classic group with members becomes, or None if the policy,
        its protocol type or its size forbid it (the joiner then gets GROUP_ID_NOT_FOUND)."""
        if (not self.config.upgrade_enabled or classic.protocol_type != PROTOCOL_TYPE
                or classic.protocol_name is None or classic.state is ClassicGroupState.DEAD
                or len(classic.members) >= self.config.consumer_max_size):
            return None
        group = ConsumerGroup(classic.group_id, classic.partition,
                              group_epoch=classic.generation_id,
                              assignment_epoch=classic.generation_id,
                              state_timestamp_ms=self.clock.time_ms())
        try:
            for m in classic.members.values():
                group.add_member(self._from_classic(classic, m))
        except (KeyError, ValueError, UnicodeDecodeError) as exc:
            log.info("group %s: cannot upgrade, a member's metadata is not the consumer "
                     "protocol's: %s", classic.group_id, exc)
            return None
        group.target = {m.member_id: m.assigned for m in group.members.values()}
        for m in classic.members.values():
            self.membership.fail_waiters(m, ErrorCode.REBALANCE_IN_PROGRESS)
        group.offsets, group.offsets_written_at = classic.offsets, classic.offsets_written_at
        del self.groups.classic[classic.group_id]
        self.groups.consumer[group.group_id] = group
        records.append((group_key(group.group_id), None))
        records.extend(_consumer_group_records(group))
        self.consumer.refresh_topics(group, records)
        log.info("group %s: classic group of generation %d upgraded to a consumer group with "
                 "%d classic member(s)", group.group_id, group.group_epoch, len(group.members))
        return group

    def _from_classic(self, classic: Group, m: Member) -> ConsumerMember:
        assert classic.protocol_name is not None
        subscription = decode_subscription(m.metadata_for(classic.protocol_name))
        assigned = self._by_id(decode_assignment(m.assignment))
        return ConsumerMember(
            m.member_id, instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=classic.generation_id,
            previous_member_epoch=classic.generation_id, assigned=assigned,
            session_deadline=self.now + m.session_timeout_ms / 1000,
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
        )

    # -- downgrade ------------------------------------------------------------------------
    def downgrade(self, group: ConsumerGroup, records: list[KeyValue], generation: int) -> bool:
        """Turn a consumer group left with classic members only into a classic group that
        rebalances; False (nothing done) if the policy or the members forbid it. The
        generation is the group epoch before the members that left were removed (Kafka
        converts instead of bumping it), so the members' commits at their epoch still count
        until they rejoin."""
        if (not self.config.downgrade_enabled or not group.all_classic()
                or len(group.members) > self.config.max_size
                or self.groups.consumer.get(group.group_id) is not group):
            return False
        classic = Group(group.group_id, group.partition, state=ClassicGroupState.STABLE,
                        state_timestamp_ms=self.clock.time_ms(), protocol_type=PROTOCOL_TYPE,
                        generation_id=generation)
        for m in group.members.values():
            assert m.classic is not None
            classic.add_member(Member(
                m.member_id, m.instance_id, m.client_id, m.client_host,
                m.classic.session_timeout_ms, m.rebalance_timeout_ms, PROTOCOL_TYPE,
                list(m.classic.protocols), encode_assignment(self._by_name(m.assigned)),
                heartbeat_deadline=self.now + m.classic.session_timeout_ms / 1000,
            ))
        if not classic.candidate_protocols():
            log.info("group %s: cannot downgrade, its members share no protocol",
                     group.group_id)
            return False
        classic.protocol_name = classic.select_protocol()
        classic.offsets, classic.offsets_written_at = group.offsets, group.offsets_written_at
        for member_id in group.members:
            records.extend(cr.member_tombstones(group.group_id, member_id))
        records.extend(cr.group_tombstones(group.group_id))
        records.append((group_key(group.group_id), group_value(group_record(classic))))
        del self.groups.consumer[group.group_id]
        self.groups.classic[group.group_id] = classic
        log.info("group %s: consumer group of epoch %d downgraded to a classic group with %d "
                 "member(s)", group.group_id, group.group_epoch, len(classic.members))
        self.membership.rebalance.prepare(classic, "downgraded from the consumer protocol")
        return True

    # -- classic members of consumer groups -----------------------------------------------
    def serves(self, group_id: str) -> bool:
        group = self.groups.consumer.get(group_id)
        return group is not None and bool(group.members)

    def _group(self, group_id: str) -> ConsumerGroup:
        self.groups.check_coordinator(group_id)
        group = self.groups.consumer.get(group_id)
        if group is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        return group

    @staticmethod
    def _classic_member(group: ConsumerGroup, member_id: str,
                        instance_id: str | None) -> ConsumerMember:
        if instance_id is not None:
            current_id = group.static_members.get(instance_id)
            if current_id is not None and current_id != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if member.classic is None:
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        return member

    async def join(self, req: JoinRequest) -> JoinResult:
        records: list[KeyValue] = []
        try:
            group = self._group(req.group_id)
            cfg = self.config
            if not (cfg.min_session_timeout_ms <= req.session_timeout_ms
                    <= cfg.max_session_timeout_ms):
                raise GroupError(ErrorCode.INVALID_SESSION_TIMEOUT)
            if req.protocol_type != PROTOCOL_TYPE or not req.protocols:
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            try:
                subscription = decode_subscription(req.protocols[0][1])
            except (ValueError, UnicodeDecodeError):
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL) from None
            if not req.member_id and req.require_known_member and req.group_instance_id is None:
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, f"{req.client_id}-{uuid.uuid4()}")
            try:
                member, bump = self._joining(group, req, subscription.topics, records)
                _, after = self.consumer.advance(group, member, bump,
                                                 self._by_id(subscription.owned), records)
            finally:
                if records:
                    await self.consumer.store(group.partition, records)
        except GroupError as exc:
            return JoinResult(exc.error_code, req.member_id)
        assert member.classic is not None
        if member.rebalance_timeout_ms > 0:
            member.sync_deadline = self.now + member.rebalance_timeout_ms / 1000
        return JoinResult(ErrorCode.NONE, member.member_id, after.member_epoch, PROTOCOL_TYPE,
                          member.classic.protocol_name, "", [])

    def _joining(self, group: ConsumerGroup, req: JoinRequest, topics: tuple[str, ...],
                 records: list[KeyValue]) -> tuple[ConsumerMember, bool]:
        """The member (new, or a static one's new id) with the join's metadata, and whether
        the group needs a new epoch."""
        member_id = req.member_id or f"{req.client_id}-{uuid.uuid4()}"
        old_id = group.static_members.get(req.group_instance_id or "")
        if req.group_instance_id is not None and old_id is not None and old_id != member_id:
            old = group.members[old_id]
            self.consumer.remove(group, old, f"replaced by {member_id}", records)
        member = group.members.get(member_id)
        joined = member is None
        if member is None:
            if len(group.members) >= self.config.consumer_max_size:
                raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED)
            member = ConsumerMember(member_id, instance_id=req.group_instance_id)
            group.add_member(member)
            log.info("group %s: classic member %s joined (%s)", group.group_id, member_id,
                     req.client_host)
        elif member.classic is None:
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        before = (member.subscribed_topic_names, member.classic)
        member.subscribed_topic_names = tuple(sorted(set(topics)))
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        member.classic = ClassicMemberMetadata(req.session_timeout_ms, tuple(req.protocols))
        member.session_deadline = self.now + req.session_timeout_ms / 1000
        member.rejoin_deadline = None
        if joined or (member.subscribed_topic_names, member.classic) != before:
            records.append((cr.key(cr.MEMBER_METADATA_KEY, group.group_id, member_id),
                            cr.member_value(member_metadata(member))))
        return member, joined or member.subscribed_topic_names != before[0]

    def sync(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
             protocol: tuple[str | None, str | None]) -> SyncResult:
        try:
            group = self._group(group_id)
            member = self._classic_member(group, member_id, instance_id)
            assert member.classic is not None
            protocol_type, protocol_name = protocol
            if (protocol_type not in (None, PROTOCOL_TYPE)
                    or protocol_name not in (None, member.classic.protocol_name)):
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if generation_id != member.member_epoch:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        except GroupError as exc:
            return SyncResult(exc.error_code)
        member.session_deadline = self.now + member.classic.session_timeout_ms / 1000
        member.sync_deadline = None
        return SyncResult(ErrorCode.NONE, PROTOCOL_TYPE, member.classic.protocol_name,
                          encode_assignment(self._by_name(member.assigned)))

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        try:
            group = self._group(group_id)
            member = self._classic_member(group, member_id, instance_id)
        except GroupError as exc:
            return exc.error_code
        assert member.classic is not None
        member.session_deadline = self.now + member.classic.session_timeout_ms / 1000
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        if _should_rejoin(group, member):
            if member.rejoin_deadline is None and member.rebalance_timeout_ms > 0:
                member.rejoin_deadline = self.now + member.rebalance_timeout_ms / 1000
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[ErrorCode]:
        records: list[KeyValue] = []
        errors = []
        try:
            group = self._group(group_id)
        except GroupError as exc:
            return [exc.error_code] * len(leaving)
        epoch = group.group_epoch
        for member_id, instance_id in leaving:
            if instance_id is not None:
                member_id = group.static_members.get(instance_id, member_id)
            member = group.members.get(member_id)
            if member is None:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            self.consumer.remove(group, member, "left the group", records)
            errors.append(ErrorCode.NONE)
        if records:
            self.downgrade(group, records, epoch)
            try:
                self.groups.write(group.partition, records)
            except GroupError as exc:
                log.warning("group %s: cannot store members leaving: %s", group_id, exc)
                self.consumer.reload(group.partition)
        return errors


def _should_rejoin(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Kafka's rule for a classic member's heartbeat in a consumer group: it rejoins to
    catch up with the group epoch, to revoke, or to take partitions now released."""
    if member.member_epoch < group.group_epoch:
        return True
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        return True
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        owners = group.owners(member.member_id)
        target = group.target.get(member.member_id, {})
        return any((t, p) not in owners for t, parts in target.items() for p in parts
                   if p not in member.assigned.get(t, frozenset()))
    return False


def _consumer_group_records(group: ConsumerGroup) -> list[KeyValue]:
    """Every record of a consumer group, as a conversion writes them."""
    gid = group.group_id
    members = list(group.members.values())
    records: list[KeyValue] = [(cr.key(cr.MEMBER_METADATA_KEY, gid, m.member_id),
                                cr.member_value(member_metadata(m))) for m in members]
    records.append((cr.key(cr.GROUP_EPOCH_KEY, gid), cr.epoch_value(group.group_epoch)))
    records += [(cr.key(cr.TARGET_MEMBER_KEY, gid, member_id), cr.target_value(target))
                for member_id, target in group.target.items()]
    records.append((cr.key(cr.TARGET_EPOCH_KEY, gid), cr.epoch_value(group.assignment_epoch)))
    records += [(cr.key(cr.CURRENT_ASSIGNMENT_KEY, gid, m.member_id),
                 cr.current_value(current(m))) for m in group.members.values()]
    return records
