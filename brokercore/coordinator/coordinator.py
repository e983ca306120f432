"""The group coordinator of one broker: the groups whose `__consumer_offsets` partition it leads.

It builds the table of groups (`Groups`, classic and KIP-848) and the protocols' logic,
`Membership` (classic), `ConsumerProtocol` (KIP-848) and `Offsets`, and hands each part the
table, the clock and the settings it works with; the parts never reach back to this class.
Everything runs on the event loop. This class replays a partition's groups when it is
loaded and drops them when it is lost, and runs the deadline sweep (`tick`) that expires
sessions, phases and old offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from brokercore.clock import Clock
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .config import CoordinatorConfig
from .consumer_group import ConsumerGroup
from .consumer_protocol import ConsumerProtocol
from .consumer_records import replay as replay_consumer_record
from .groups import Groups
from .loading import PartitionedCoordinator, Slices
from .membership import Membership
from .migration import Migration
from .offsets import Offsets
from .offsets_topic import OFFSETS_TOPIC, OffsetsStore
from .records import GroupRecord, OffsetsRecord
from .state import ClassicGroupState, Group, GroupError, Member

log = logging.getLogger(__name__)


class GroupCoordinator(PartitionedCoordinator):
    topic = OFFSETS_TOPIC
    store: OffsetsStore

    def __init__(
        self, store: OffsetsStore, clock: Clock, config: CoordinatorConfig,
        topic_exists: Callable[[TopicPartition], bool] = lambda tp: True,
        topics: Callable[[], dict[str, tuple[str, int]]] = dict,
        group_configs: Callable[[str], dict[str, str]] = lambda group_id: {},
    ) -> None:
        super().__init__(store)
        self.clock = clock
        self.config = config
        # What KIP-848 groups subscribe to: topic name -> (topic id, partition count).
        self.topics = topics
        self.groups = Groups(store, self.partitions.check, clock, config.commit_timeout_ms,
                             self._spawn)
        self.consumer = ConsumerProtocol(self.groups, clock, config, topics,
                                         self.partitions.reload, group_configs)
        self.membership = Membership(self.groups, clock, config, self.consumer.yield_to_classic)
        self.migration = Migration(self.groups, clock, config, self.consumer, self.membership)
        self.consumer.migrations = self.migration
        self.membership.in_consumer_groups = self.migration
        self.offsets = Offsets(self.groups, clock, config, topic_exists)
        self._next_expiry = clock.monotonic() + config.retention_check_interval_ms / 1000

    # -- the deadline sweep ---------------------------------------------------------------
    def tick(self) -> None:
        super().tick()
        for group in list(self.groups.classic.values()):
            self.membership.expire(group)
        for consumer_group in list(self.groups.consumer.values()):
            self.consumer.expire(consumer_group)
        if self.clock.monotonic() >= self._next_expiry:
            self._next_expiry = self.clock.monotonic() + (
                self.config.retention_check_interval_ms / 1000)
            self.offsets.expire()

    # -- finding groups -------------------------------------------------------------------
    def partition_of(self, group_id: str) -> int:
        return self.groups.partition_of(group_id)

    # -- loading and unloading partitions -------------------------------------------------
    def load_partition(self, partition: int, epoch: int = 0) -> Slices:
        """Replay the partition, yielding between slices; the groups appear at the end."""
        offsets: dict[str, dict[TopicPartition, OffsetsRecord]] = {}
        metadata: dict[str, GroupRecord | None] = {}
        consumer: dict[str, ConsumerGroup] = {}
        records = self.offsets.replay_transactions(partition, self.store.replay(partition))
        for n, record in enumerate(records, 1):
            if record.consumer is not None:
                replay_consumer_record(consumer, record.consumer, partition)
            elif record.tp is not None:
                offsets.setdefault(record.group_id, {})[record.tp] = record
            else:
                metadata[record.group_id] = record.group
            if n % self.load_slice_records == 0:
                yield
        for group_id in offsets.keys() | metadata.keys() | consumer.keys():
            live = {tp: r.offset for tp, r in offsets.get(group_id, {}).items()
                    if r.offset is not None}
            consumer_group = consumer.get(group_id)
            if consumer_group is not None and not consumer_group.dead:
                consumer_group.offsets.update(live)
                self.groups.consumer[group_id] = consumer_group
                self.consumer.restored(consumer_group)
                continue
            stored = metadata.get(group_id)
            if stored is None and not live:
                continue
            group = self.groups.create_classic(group_id)
            group.offsets.update(live)
            if stored is not None:
                self._restore(group, stored)
        log.info("loaded __consumer_offsets-%d in leader epoch %d: %d group(s)", partition, epoch,
                 sum(1 for g in self.groups.classic.values() if g.partition == partition)
                 + sum(1 for c in self.groups.consumer.values() if c.partition == partition))

    def _restore(self, group: Group, stored: GroupRecord) -> None:
        """Replay a group's metadata: its members stay members for one session timeout."""
        group.protocol_type = stored.protocol_type
        group.generation_id = stored.generation_id
        group.state_timestamp_ms = stored.state_timestamp_ms
        if not stored.members or stored.protocol_name is None:
            return
        group.protocol_name = stored.protocol_name
        now = self.clock.monotonic()
        for m in stored.members:
            group.add_member(Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.session_timeout_ms, m.rebalance_timeout_ms, stored.protocol_type,
                [(stored.protocol_name, m.subscription)], m.assignment,
                heartbeat_deadline=now + m.session_timeout_ms / 1000,
            ))
        group.leader_id = stored.leader_id if stored.leader_id in group.members else None
        # replay sets state directly: it reproduces a past transition
        group.state = ClassicGroupState.STABLE

    def unload_partition(self, partition: int) -> None:
        for group in [g for g in self.groups.classic.values() if g.partition == partition]:
            for member in group.members.values():
                self.membership.fail_waiters(member, ErrorCode.NOT_COORDINATOR)
            del self.groups.classic[group.group_id]
        for group_id in [g for g, cg in self.groups.consumer.items() if cg.partition == partition]:
            del self.groups.consumer[group_id]
        self.offsets.unload(partition)

    # -- ListGroups and DescribeGroups ----------------------------------------------------
    def list_groups(self, states: set[str] | None = None,
                    types: set[str] | None = None) -> list[Group | ConsumerGroup]:
        """Groups of both protocols, filtered by state and type ("classic", "consumer"),
        case-insensitively as Kafka does. While any partition loads, Kafka 4.0 answers
        COORDINATOR_LOAD_IN_PROGRESS rather than a list without that partition's groups."""
        code = self.check_loading_all()
        if code != ErrorCode.NONE:
            raise GroupError(code)
        lowered = {s.lower() for s in states} if states else None
        kinds = {t.lower() for t in types} if types else {"classic", "consumer"}
        found: list[Group | ConsumerGroup] = []
        if "classic" in kinds:
            found += self.groups.classic.values()
        if "consumer" in kinds:
            found += self.groups.consumer.values()
        return [g for g in found if lowered is None or g.state.value.lower() in lowered]

    def describe_group(self, group_id: str) -> Group | ConsumerGroup | None:
        self.groups.check_coordinator(group_id)
        return self.groups.get(group_id)
