"""Committed offsets: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups
and expiry.

A commit is checked against the group (generation and member, or a "simple" commit with
generation -1 into an Empty or unknown group), written to `__consumer_offsets`, and applied
to the in-memory table only once the partition's in-sync replicas have it. So what clients
read back is always what a restart, or a new coordinator after a failover, replays.

A transactional commit (TxnOffsetCommit) is written the same way, as a transactional batch
of its producer, but stays pending, apart from the group's offsets, until the transaction's
marker reaches this partition: a commit marker applies the offsets, an abort drops them.
Replaying the partition does the same with the markers it finds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from brokercore.clock import Clock
from brokercore.log.verification import VerificationGuard
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .config import CoordinatorConfig
from .consumer_group import ConsumerGroup
from .consumer_records import group_tombstones
from .groups import Groups
from .records import (
    OffsetsRecord,
    TxnMarker,
    group_key,
    offset_key,
    offset_value,
    subscription_topics,
)
from .state import ClassicGroupState, Group, GroupError, OffsetAndMetadata

log = logging.getLogger(__name__)

# (offset, leader_epoch, metadata) per partition, as a client commits them.
Commit = tuple[int, int, str | None]


GroupsOffsets = dict[str, dict[TopicPartition, OffsetAndMetadata]]
Pending = dict[tuple[int, int], tuple[int, GroupsOffsets]]


class Offsets:
    def __init__(self, groups: Groups, clock: Clock, config: CoordinatorConfig,
                 topic_exists: Callable[[TopicPartition], bool]) -> None:
        self.groups = groups
        self.clock = clock
        self.config = config
        self.topic_exists = topic_exists
        self.pending: Pending = {}

    # -- OffsetCommit ---------------------------------------------------------------------
    async def commit(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
        commits: dict[TopicPartition, Commit], api_version: int = 9,
    ) -> dict[TopicPartition, ErrorCode]:
        """`generation_id` is the member epoch for a KIP-848 consumer group."""
        try:
            group = self._group_for_commit(group_id, generation_id, member_id, instance_id,
                                           api_version)
        except GroupError as exc:
            return dict.fromkeys(commits, exc.error_code)
        errors: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        now_ms = self.clock.time_ms()
        for tp, (offset, leader_epoch, metadata) in commits.items():
            if metadata is not None and len(metadata.encode()) > self.config.metadata_max_bytes:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            elif not self.topic_exists(tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                accepted[tp] = OffsetAndMetadata(offset, leader_epoch, metadata or "", now_ms)
        if accepted:
            try:
                written_at = self.groups.write(group.partition, [
                    (offset_key(group_id, tp), offset_value(om)) for tp, om in accepted.items()
                ])
                await self.groups.replicated(group.partition, written_at)
            except GroupError as exc:
                return {**errors, **dict.fromkeys(accepted, exc.error_code)}
            self._apply(group, accepted, written_at)
        return {**errors, **dict.fromkeys(accepted, ErrorCode.NONE)}

    # -- TxnOffsetCommit ------------------------------------------------------------------
    def start_txn_verification(self, group_id: str, producer: tuple[int, int]
                               ) -> VerificationGuard | None:
        """KIP-890 before a TxnOffsetCommit, as Kafka 4.0's group coordinator does: the
        guard the write must carry once the transaction coordinator vouches that the
        transaction includes the group's partition (SENTINEL: its transaction is open
        there already); None if the group is not served here (the commit answers why)."""
        try:
            self.groups.check_coordinator(group_id)
            return self.groups.store.start_verification(
                self.groups.partition_of(group_id), producer)
        except GroupError:
            return None

    async def txn_commit(
        self, group_id: str, producer: tuple[int, int], generation_id: int, member_id: str,
        instance_id: str | None, commits: dict[TopicPartition, Commit],
        verification_guard: VerificationGuard | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        """Write a transaction's offsets; they count once its commit marker arrives."""
        try:
            group = self._group_for_txn_commit(group_id, generation_id, member_id, instance_id)
        except GroupError as exc:
            return dict.fromkeys(commits, exc.error_code)
        now_ms = self.clock.time_ms()
        errors = {tp: ErrorCode.OFFSET_METADATA_TOO_LARGE for tp, (_, _, metadata) in
                  commits.items() if metadata is not None
                  and len(metadata.encode()) > self.config.metadata_max_bytes}
        errors |= {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in commits
                   if tp not in errors and not self.topic_exists(tp)}
        accepted = {tp: OffsetAndMetadata(offset, epoch, metadata or "", now_ms)
                    for tp, (offset, epoch, metadata) in commits.items() if tp not in errors}
        if accepted:
            try:
                written_at = self.groups.write(group.partition, [
                    (offset_key(group_id, tp), offset_value(om)) for tp, om in accepted.items()
                ], producer, verification_guard)
                await self.groups.replicated(group.partition, written_at)
            except GroupError as exc:
                return {**errors, **dict.fromkeys(accepted, exc.error_code)}
            self._hold(group.partition, producer, {group_id: accepted})
        return {**errors, **dict.fromkeys(accepted, ErrorCode.NONE)}

    def _group_for_txn_commit(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> Group | ConsumerGroup:
        """Kafka's rule, laxer than OffsetCommit's: a member and generation are checked only
        if given (TxnOffsetCommit before v3, and clients that know only the group id, send
        neither), whatever state the group is in."""
        if not group_id:
            raise GroupError(ErrorCode.INVALID_GROUP_ID)
        self.groups.check_coordinator(group_id)
        consumer_group = self.groups.consumer.get(group_id)
        if consumer_group is not None:
            if member_id:
                _check_consumer_commit(consumer_group, generation_id, member_id, api_version=9)
            return consumer_group
        group = self.groups.classic.get(group_id) or self.groups.create_classic(group_id)
        if group.state is ClassicGroupState.DEAD:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if member_id:
            group.known_member(member_id, instance_id)
        if generation_id >= 0 and generation_id != group.generation_id:
            raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        return group

    def _hold(self, partition: int, producer: tuple[int, int], offsets: GroupsOffsets) -> None:
        """Keep a transaction's offsets until its marker; a newer epoch of the producer
        replaces what an older (fenced) one left."""
        producer_id, epoch = producer
        held_epoch, held = self.pending.get((partition, producer_id), (epoch, {}))
        if held_epoch != epoch:
            held = {}
        for group_id, group_offsets in offsets.items():
            held.setdefault(group_id, {}).update(group_offsets)
        self.pending[(partition, producer_id)] = (epoch, held)

    def complete_txn(self, partition: int, marker: TxnMarker) -> None:
        """The transaction's marker is in the partition: apply its offsets or drop them.
        Offsets a fenced epoch of the producer wrote never count."""
        epoch, pending = self.pending.pop((partition, marker.producer_id), (-1, {}))
        if not marker.commit or epoch != marker.producer_epoch:
            return
        for group_id, offsets in pending.items():
            group = self.groups.get(group_id) or self.groups.create_classic(group_id)
            self._apply(group, offsets, marker.offset)

    def replay_transactions(
        self, partition: int, records: Iterable[OffsetsRecord | TxnMarker]
    ) -> Iterator[OffsetsRecord]:
        """The records of a partition as they count: a transaction's offsets where its commit
        marker is; the offsets of transactions still open are kept pending."""
        held: dict[int, list[OffsetsRecord]] = {}
        for record in records:
            if isinstance(record, TxnMarker):
                done = held.pop(record.producer_id, [])
                if record.commit:
                    yield from (r for r in done if r.producer_epoch == record.producer_epoch)
            elif record.producer_id >= 0 and record.tp is not None:
                kept = [r for r in held.get(record.producer_id, [])
                        if r.producer_epoch == record.producer_epoch]
                held[record.producer_id] = [*kept, record]
            else:
                yield record
        for producer_id, open_records in held.items():
            for r in open_records:
                if r.offset is not None and r.tp is not None:
                    self._hold(partition, (producer_id, r.producer_epoch),
                               {r.group_id: {r.tp: r.offset}})

    def unstable(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with offsets an open transaction has committed."""
        partition = self.groups.partition_of(group_id)
        return {tp for (p, _), (_, groups) in self.pending.items() if p == partition
                for tp in groups.get(group_id, {})}

    def unload(self, partition: int) -> None:
        for key in [key for key in self.pending if key[0] == partition]:
            del self.pending[key]

    def _apply(self, group: Group | ConsumerGroup,
               accepted: dict[TopicPartition, OffsetAndMetadata], written_at: int) -> None:
        """Kafka's rule: a commit replicated after a newer one's does not overwrite it."""
        if self.groups.get(group.group_id) is not group:
            return  # the partition was unloaded while waiting; the log has the commit
        for tp, om in accepted.items():
            if group.offsets_written_at.get(tp, -1) < written_at:
                group.offsets[tp] = om
                group.offsets_written_at[tp] = written_at

    def _group_for_commit(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
        api_version: int,
    ) -> Group | ConsumerGroup:
        if not group_id:
            raise GroupError(ErrorCode.INVALID_GROUP_ID)
        self.groups.check_coordinator(group_id)
        consumer_group = self.groups.consumer.get(group_id)
        if consumer_group is not None:
            _check_consumer_commit(consumer_group, generation_id, member_id, api_version)
            return consumer_group
        group = self.groups.classic.get(group_id)
        if group is None:
            if generation_id >= 0:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
            return self.groups.create_classic(group_id)  # a group that only stores offsets
        if group.state is ClassicGroupState.DEAD:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and group.state is ClassicGroupState.EMPTY:
            # Kafka's order: generation -1 into an Empty group is a simple commit whatever
            # member id comes with it. librdkafka under group.protocol=consumer names the
            # member id it made itself (KIP-1082) before it has joined anything.
            return group
        if generation_id >= 0 or member_id or instance_id is not None:
            self._check_member(group, generation_id, member_id, instance_id)
        elif group.state is not ClassicGroupState.EMPTY:
            # A commit from outside a group that has members would undo their progress.
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        return group

    def _check_member(
        self, group: Group, generation_id: int, member_id: str, instance_id: str | None
    ) -> None:
        member = group.known_member(member_id, instance_id)
        if generation_id != group.generation_id:
            raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        if group.state is ClassicGroupState.COMPLETING_REBALANCE:
            raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)
        member.heartbeat_deadline = (
            self.clock.monotonic() + member.session_timeout_ms / 1000)

    # -- OffsetFetch ----------------------------------------------------------------------
    def fetch(
        self, group_id: str, partitions: list[TopicPartition] | None,
        member: tuple[str | None, int] | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets (None: nothing committed); all of them if partitions is None.
        `member` (OffsetFetch v9's member id and epoch) is checked for consumer groups."""
        self.groups.check_coordinator(group_id)
        group: Group | ConsumerGroup | None = self.groups.classic.get(group_id)
        if group is None:
            group = self.groups.consumer.get(group_id)
            if group is not None and member is not None:
                _check_consumer_fetch(group, *member)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return dict(stored)
        return {tp: stored.get(tp) for tp in partitions}

    # -- OffsetDelete and DeleteGroups ----------------------------------------------------
    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Per-partition errors; raises GroupError for the whole request."""
        self.groups.check_coordinator(group_id)
        group, subscribed = self._group_and_topics(group_id)
        if subscribed is None:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)
        errors = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions
                  if tp.topic in subscribed}
        deletable = [tp for tp in partitions if tp not in errors]
        written_at = self._remove_offsets(group, [tp for tp in deletable if tp in group.offsets])
        if written_at >= 0:
            await self.groups.replicated(group.partition, written_at)
        return {**errors, **dict.fromkeys(deletable, ErrorCode.NONE)}

    def _group_and_topics(self, group_id: str) -> tuple[Group | ConsumerGroup, set[str] | None]:
        """The group whose offsets to delete, and the topics it consumes (None: unknown)."""
        consumer_group = self.groups.consumer.get(group_id)
        if consumer_group is not None:
            return consumer_group, set(consumer_group.subscribed_topics)
        group = self.groups.classic.get(group_id)
        if group is None or group.state is ClassicGroupState.DEAD:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)
        return group, set() if group.state is ClassicGroupState.EMPTY else _subscribed_topics(group)

    async def delete_group(self, group_id: str) -> ErrorCode:
        try:
            if not group_id:
                raise GroupError(ErrorCode.INVALID_GROUP_ID)
            self.groups.check_coordinator(group_id)
            if group_id in self.groups.consumer:
                await self._delete_consumer_group(self.groups.consumer[group_id])
                return ErrorCode.NONE
            group = self.groups.classic.get(group_id)
            if group is None or group.state is ClassicGroupState.DEAD:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)
            if group.state is not ClassicGroupState.EMPTY:
                raise GroupError(ErrorCode.NON_EMPTY_GROUP)
            await self.groups.replicated(group.partition, self._remove_group(group))
        except GroupError as exc:
            return exc.error_code
        return ErrorCode.NONE

    async def _delete_consumer_group(self, group: ConsumerGroup) -> None:
        if group.members:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)
        await self.groups.replicated(group.partition, self._remove_consumer_group(group))

    def _remove_consumer_group(self, group: ConsumerGroup) -> int:
        """Tombstones for its offsets and its own records; the offset to wait for."""
        tombstones = [(offset_key(group.group_id, tp), None) for tp in group.offsets]
        written_at = self.groups.write(group.partition,
                                       [*tombstones, *group_tombstones(group.group_id)])
        group.offsets.clear()
        del self.groups.consumer[group.group_id]
        log.info("group %s: deleted", group.group_id)
        return written_at

    def _remove_offsets(self, group: Group | ConsumerGroup,
                        partitions: list[TopicPartition]) -> int:
        """Tombstones for the offsets; the offset to wait for, -1 if nothing was written."""
        if not partitions:
            return -1
        written_at = self.groups.write(
            group.partition, [(offset_key(group.group_id, tp), None) for tp in partitions])
        for tp in partitions:
            group.offsets.pop(tp, None)
            group.offsets_written_at[tp] = written_at
        return written_at

    def _remove_group(self, group: Group) -> int:
        """Tombstones for every offset and the group metadata; then the group is Dead."""
        tombstones = [(offset_key(group.group_id, tp), None) for tp in group.offsets]
        written_at = self.groups.write(group.partition,
                                       [*tombstones, (group_key(group.group_id), None)])
        group.offsets.clear()
        group.transition_to(ClassicGroupState.DEAD, self.clock.time_ms())
        del self.groups.classic[group.group_id]
        log.info("group %s: deleted", group.group_id)
        return written_at

    # -- expiry ---------------------------------------------------------------------------
    def expire(self) -> None:
        """offsets.retention.minutes: drop old offsets of Empty groups, then empty groups.

        A group with a protocol type counts from when it became Empty; a group that only
        stores offsets counts from each commit.
        """
        now_ms = self.clock.time_ms()
        retention = self.config.offsets_retention_ms
        self._expire_consumer_groups(now_ms - retention)
        empty = [g for g in self.groups.classic.values() if g.state is ClassicGroupState.EMPTY]
        for group in empty:
            since = group.state_timestamp_ms if group.protocol_type else None
            expired = [tp for tp, om in group.offsets.items()
                       if (om.commit_timestamp_ms if since is None else since) + retention
                       <= now_ms]
            try:
                self._remove_offsets(group, expired)
                if not group.offsets:
                    self._remove_group(group)
            except GroupError as exc:
                log.warning("group %s: cannot expire offsets: %s", group.group_id, exc)
            else:
                if expired:
                    log.info("group %s: expired %d offset(s)", group.group_id, len(expired))

    def _expire_consumer_groups(self, committed_before_ms: int) -> None:
        """KIP-848 groups without members: each offset ages from its commit, as in Kafka;
        a group left with no offsets is deleted."""
        for group in [g for g in self.groups.consumer.values() if not g.members]:
            expired = [tp for tp, om in group.offsets.items()
                       if om.commit_timestamp_ms <= committed_before_ms]
            try:
                self._remove_offsets(group, expired)
                if not group.offsets:
                    self._remove_consumer_group(group)
            except GroupError as exc:
                log.warning("group %s: cannot expire offsets: %s", group.group_id, exc)


def _subscribed_topics(group: Group) -> set[str] | None:
    """Topics a classic group's members subscribe to (consumer protocol), None if unknown."""
    if group.protocol_type != "consumer" or group.protocol_name is None:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        try:
            topics |= subscription_topics(member.metadata_for(group.protocol_name))
        except (KeyError, ValueError):
            return None
    return topics


def _check_consumer_commit(group: ConsumerGroup, member_epoch: int, member_id: str,
                           api_version: int) -> None:
    """Kafka's rule for consumer groups: members commit at their current epoch with v9+;
    anyone else (an admin, a simple consumer) only while the group has no members."""
    if member_epoch < 0 and not group.members:
        return
    member = group.members.get(member_id)
    if member is None:
        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
    if member.classic is not None:
        # A classic member commits as in a classic group: its generation is its epoch.
        if member_epoch != member.member_epoch:
            raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        return
    if api_version < 9:
        raise GroupError(ErrorCode.UNSUPPORTED_VERSION)
    if member_epoch != member.member_epoch:
        raise GroupError(ErrorCode.STALE_MEMBER_EPOCH)


def _check_consumer_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> None:
    if member_id is None and member_epoch < 0:
        return  # an admin or a consumer outside the group
    member = group.members.get(member_id or "")
    if member is None:
        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
    if member_epoch != member.member_epoch:
        raise GroupError(ErrorCode.STALE_MEMBER_EPOCH)
